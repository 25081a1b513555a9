"""Triton's model config and repository index through a real haproxy gateway, with tritonclient.

One workload has a real inference server process behind the gateway, the other none: the index
says READY for the first and UNAVAILABLE for the second (and leaves it out for `{"ready": true}`),
and the config request is routed to the workload's server, so it equals the server's own answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from autoscaler.core.routing.routes import AddServer, SetWeight
from autoscaler.gateway.base import GatewaySpec
from autoscaler.gateway.local import LocalHaproxy
from tests.agents.server.helpers import Served, start_server, stop_server
from tests.kit import web
from tests.kit.agent import free_port, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[Served]:
    server = start_server(tmp_path_factory.mktemp("srv"), tiny_model_dir, "w", batch=4)
    yield server
    stop_server(server)


@pytest.fixture()
def gateway(tmp_path: Path, served: Served) -> Iterator[GatewaySpec]:
    gw = LocalHaproxy(tmp_path / "gw")
    spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("w", "idle"), check_interval_s=0.2)
    gw.ensure(spec)
    try:
        assert gw.apply([AddServer("w", "w-0", f"127.0.0.1:{served.port}"), SetWeight("w", "w-0", 256)]) == []
        wait_until(lambda: gw.observe().serving() == {"w-0"}, 15, "the server to pass its checks")
        yield spec
    finally:
        gw.stop()


def test_model_config_through_the_gateway_is_the_servers(gateway: GatewaySpec, served: Served) -> None:
    with triton.InferenceServerClient(gateway.listen) as client:
        config = client.get_model_config("w")
        assert config == client.get_model_config("w", model_version="1")
        with pytest.raises(InferenceServerException, match="unknown model"):
            client.get_model_config("zz")
        with pytest.raises(InferenceServerException, match="no server of this workload"):
            client.get_model_config("idle")
    with triton.InferenceServerClient(served.url.removeprefix("http://")) as direct:
        assert config == direct.get_model_config("w")
    assert config["input"][0]["data_type"] == "TYPE_FP32" and config["max_batch_size"] == 64  # the agent's default
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]  # the server's batch


def test_repository_index_through_the_gateway(gateway: GatewaySpec) -> None:
    with triton.InferenceServerClient(gateway.listen) as client:
        index = client.get_model_repository_index()
    assert index == [
        {"name": "w", "version": "1", "state": "READY"},
        {"name": "idle", "version": "1", "state": "UNAVAILABLE", "reason": "no server takes requests"},
    ]
    url = f"http://{gateway.listen}/v2/repository/index"
    assert web.post(url, json={"ready": True}).json() == [{"name": "w", "version": "1", "state": "READY"}]
    assert web.post(url, json={"ready": False}).json() == index
    assert web.get(url).status_code == 404  # Triton's index is a POST
