"""Counters and histograms that the workers add to in the database (``metric_counts``), in the
transaction of what they count, so that ``/metrics`` shows the same figures whichever process
answers, however many workers there are.

A histogram is kept as the count of observations per bucket (the smallest bound at or above the
value, ``+Inf`` past the last), with its sum and count; a scrape makes the buckets cumulative.
"""

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric

from tessera.db import Transaction
from tessera.models import MetricCount

Count = dict[str, Any]  # a row of metric_counts to add

# NFTs (parts) per extrinsic, and seconds from an item's issue to its NFT in a final block.
PARTS = (1, 5, 10, 25, 50, 100, 200, 300, 400, 500, 1000)
MINT_SECONDS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400)


def _le(bound: float) -> str:
    return "+Inf" if bound == math.inf else f"{bound:g}"


def _labels(labels: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(labels.items())), separators=(",", ":"))


def counter(name: str, labels: Mapping[str, str], by: float = 1) -> Count:
    return {"name": name, "labels": _labels(labels), "value": float(by)}


def observe(
    name: str, labels: Mapping[str, str], value: float, bounds: Sequence[float], times: int = 1
) -> list[Count]:
    """``times`` observations of ``value``: its bucket, the sum and the count."""
    bound = next((b for b in bounds if value <= b), math.inf)
    return [
        {"name": f"{name}_bucket", "labels": _labels({**labels, "le": _le(bound)}), "value": times},
        {"name": f"{name}_sum", "labels": _labels(labels), "value": float(value) * times},
        {"name": f"{name}_count", "labels": _labels(labels), "value": times},
    ]


def observe_many(
    name: str, labels: Mapping[str, str], values: Sequence[float], bounds: Sequence[float]
) -> list[Count]:
    """Observations of ``values``, added up per bucket."""
    per_bucket: dict[float, int] = defaultdict(int)
    for value in values:
        per_bucket[next((b for b in bounds if value <= b), math.inf)] += 1
    if not values:
        return []
    return [
        *(
            {"name": f"{name}_bucket", "labels": _labels({**labels, "le": _le(b)}), "value": n}
            for b, n in sorted(per_bucket.items())
        ),
        {"name": f"{name}_sum", "labels": _labels(labels), "value": float(sum(values))},
        {"name": f"{name}_count", "labels": _labels(labels), "value": len(values)},
    ]


def families(
    rows: Iterable[tuple[str, str, float]],
    *,
    counters: Mapping[str, tuple[str, Sequence[str]]],
    histograms: Mapping[str, tuple[str, Sequence[str], Sequence[float]]],
) -> list[Metric]:
    """The families of the counts recorded (``rows``: name, labels, value): each counter and
    histogram named, with its help and label names (and a histogram's bounds), shown even
    before anything was counted."""
    recorded: dict[str, dict[tuple[str, ...], dict[str, float]]] = defaultdict(dict)
    for name, labels_text, value in rows:
        labels = json.loads(labels_text)
        base, _, part = name.rpartition("_")
        if base in histograms and part in ("bucket", "sum", "count"):
            _, label_names, _ = histograms[base]
            series = tuple(labels.get(n, "") for n in label_names)
            slot = part if part != "bucket" else f"le={labels['le']}"
            recorded[base].setdefault(series, {})[slot] = value
        elif name in counters:
            _, label_names = counters[name]
            series = tuple(labels.get(n, "") for n in label_names)
            recorded[name].setdefault(series, {})["value"] = value
    shown: list[Metric] = []
    for name, (help_text, label_names) in counters.items():
        family = CounterMetricFamily(name.removesuffix("_total"), help_text, labels=label_names)
        for series, values in sorted(recorded[name].items()):
            family.add_metric(list(series), values["value"])
        shown.append(family)
    for name, (help_text, label_names, bounds) in histograms.items():
        family_h = HistogramMetricFamily(name, help_text, labels=label_names)
        for series, values in sorted(recorded[name].items()):
            cumulative, buckets = 0.0, []
            for bound in [*bounds, math.inf]:
                cumulative += values.get(f"le={_le(bound)}", 0)
                buckets.append((_le(bound), cumulative))
            family_h.add_metric(list(series), buckets, sum_value=values.get("sum", 0.0))
        shown.append(family_h)
    return shown


async def add_counts(tx: Transaction, counts: Sequence[Count]) -> None:
    """Add to the counters (rows of ``metric_counts``: name, labels, value to add), in the
    transaction of what they count."""
    await tx.add_to(MetricCount, counts, unique=("name", "labels"), column="value")
