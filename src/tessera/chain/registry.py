"""The configured chains of a process, each with one lazily connected gateway."""

import asyncio
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from tessera.chain.gateway import ChainGateway, ChainUnreachable
from tessera.chain.substrate import SubstrateGateway
from tessera.config import CHAINS, ChainConfig, Settings
from tessera.errors import ChainNotConfigured, ChainUnavailable

T = TypeVar("T")


# Opens the gateway of one chain: (RPC URL, timeout) -> gateway. Tests pass an in-memory chain.
Connect = Callable[[str, float], ChainGateway]


def _substrate(url: str, timeout: float) -> ChainGateway:
    return SubstrateGateway(url, timeout=timeout)


class Chains:
    def __init__(self, settings: Settings, *, connect: Connect = _substrate) -> None:
        self.settings = settings
        self.timeout = settings.chain_timeout_seconds
        self.connect = connect
        self.gateways: dict[str, ChainGateway] = {}
        # What the batches of each chain can carry, measured (tessera.extrinsics): per process.
        self.capacities: dict[tuple[str, tuple[object, ...]], tuple[float, Any]] = {}

    def config(self, name: str) -> ChainConfig:
        config = self.settings.chain(name)
        if config is None or not config.rpc_url:
            setting = config.setting if config else "a chain of " + ", ".join(CHAINS)
            raise ChainNotConfigured(f"chain {name} is not configured: set {setting}")
        return config

    def gateway(self, name: str) -> ChainGateway:
        if name not in self.gateways:
            url = self.config(name).rpc_url
            assert url is not None  # config() refuses a chain without one
            self.gateways[name] = self.connect(url, self.timeout)
        return self.gateways[name]

    async def run(
        self,
        name: str,
        work: Callable[[ChainGateway], T],
        *,
        in_request: bool = False,
        pages: int = 0,
    ) -> T:
        """Run blocking gateway calls in a thread; an unreachable chain is a 503.

        A piece of work makes a few RPCs (each with its own timeout): the worker allows it a few
        times the RPC timeout (its lease is renewed meanwhile), a request
        ``chain_request_timeout_seconds`` in all. Work that reads in ``pages`` (a whole
        collection, 1,000 keys a page) is allowed a few times the RPC timeout and once more per
        page, wherever it runs: a page costs a runtime more the more it holds (Chopsticks, the
        local runtime, walks every block's storage for each page).
        """
        gateway = self.gateway(name)
        if pages:
            deadline = self.timeout * (4 + pages)
        elif in_request:
            deadline = self.settings.chain_request_timeout_seconds
        else:
            deadline = self.timeout * 4
        try:
            return await asyncio.wait_for(asyncio.to_thread(work, gateway), deadline)
        except (ChainUnreachable, TimeoutError) as exc:
            raise ChainUnavailable(f"chain {name} is unavailable: {str(exc) or 'timeout'}") from exc

    def close(self) -> None:
        for gateway in self.gateways.values():
            close = getattr(gateway, "close", None)
            if close:
                close()
        self.gateways.clear()


async def chains_of(request: Request) -> Chains:
    chains: Chains = request.app.state.chains
    return chains


ChainsDep = Annotated[Chains, Depends(chains_of)]
