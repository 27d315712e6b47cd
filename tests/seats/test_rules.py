"""The seats' rules on rows alone: the order of seat numbers, a seat's status at a moment, and
the best seats of those available."""

import uuid
from types import SimpleNamespace

from tessera.seats.rules import best, natural, status


def test_seat_numbers_are_ordered_as_people_count_them():
    numbers = ["10", "2", "A10", "A2", "1", "B", "²", "٣"]
    # Digits count as numbers ("٣" is three), anything else as text ("²" is no decimal digit).
    assert sorted(numbers, key=natural) == ["1", "2", "٣", "10", "A2", "A10", "B", "²"]


def test_a_hold_keeps_a_seat_until_its_second_and_an_orders_hold_for_good():
    hold = uuid.uuid4()

    def seat(**values: object) -> SimpleNamespace:
        return SimpleNamespace(
            **({"blocked": False, "hold_id": None, "held_until": None, "item_id": None} | values)
        )

    assert status(seat(), now=100) == "available"
    assert status(seat(hold_id=hold, held_until=101), now=100) == "held"
    assert status(seat(hold_id=hold, held_until=100), now=100) == "available"
    assert status(seat(hold_id=hold, held_until=None), now=10**12) == "held"
    assert status(seat(blocked=True), now=100) == "blocked"
    assert status(seat(item_id=uuid.uuid4(), blocked=True), now=100) == "sold"


def test_the_best_seats_sit_together_in_the_first_row_that_has_them():
    def row(area: int, number: int, *positions: int) -> list[SimpleNamespace]:
        return [
            SimpleNamespace(
                id=f"{area}/{number}/{p}", area_position=area, row_position=number, seat_position=p
            )
            for p in positions
        ]

    # Row 0 is broken after two seats, row 1 has three in a run; area 1 comes after.
    available = row(0, 0, 0, 1, 3, 4) + row(0, 1, 5, 6, 7) + row(1, 0, 0, 1, 2, 3)
    assert best(available, 2, together=True) == ["0/0/0", "0/0/1"]
    assert best(available, 3, together=True) == ["0/1/5", "0/1/6", "0/1/7"]
    assert best(available, 4, together=True) == ["1/0/0", "1/0/1", "1/0/2", "1/0/3"]
    assert best(available, 5, together=True) is None
    assert best(available, 5, together=False) == ["0/0/0", "0/0/1", "0/0/3", "0/0/4", "0/1/5"]
    assert best(available, 12, together=False) is None
