"""`show stat` and `show servers state` parsed into a GatewayView (gateway/runtime.py): the columns
read are found by name wherever HAProxy puts them, and a reply with no table is an error."""

from __future__ import annotations

import pytest

from autoscaler.gateway.base import GatewayError, backend
from autoscaler.gateway.runtime import parse_view

pytestmark = pytest.mark.unit

BE = backend("a")
STAT = (
    "# pxname,svname,qcur,scur,stot,status,weight,act,req_tot,hrsp_5xx,rate_max,addr,uweight,extra\n"
    f"fe,FRONTEND,,1,9,OPEN,,,9,0,3,,,x\n"
    f"{BE},a-0,0,2,40,UP,7,1,,1,,127.0.0.1:9001,7,x\n"
    f"{BE},a-1,0,0,5,MAINT,0,0,,0,,127.0.0.1:9002,0,x\n"
    f"{BE},BACKEND,0,2,45,UP,7,1,45,1,6,,,x\n"
)
STATE = (
    "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight "
    "srv_check_result srv_port\n"
    f"3 {BE} 1 a-0 127.0.0.1 2 0 7 3 9001\n"
    f"3 {BE} 2 a-1 127.0.0.1 2 1 0 3 9002\n"
)


def test_servers_and_backends_come_from_the_named_columns() -> None:
    view = parse_view(STAT, STATE)
    assert view.backends["a"].requests_total == 45 and view.backends["a"].rate_max == 6
    assert view.backends["a"].servers_up == 1 and view.backends["a"].errors_5xx == 1
    a0, a1 = view.servers[("a", "a-0")], view.servers[("a", "a-1")]
    assert (a0.address, a0.admin, a0.weight, a0.check_ok, a0.sessions, a0.requests_total) == (
        "127.0.0.1:9001",
        "ready",
        7,
        True,
        2,
        40,
    )
    assert (a1.admin, a1.weight, a1.status) == ("maint", 0, "MAINT")
    assert set(view.servers) == {("a", "a-0"), ("a", "a-1")}  # the frontend is no workload's


@pytest.mark.parametrize("stat", ["", "Unknown command.\n", "# pxname,svname\n"])
def test_a_reply_with_no_table_is_an_error(stat: str) -> None:
    with pytest.raises(GatewayError, match="gave no table"):
        parse_view(stat, STATE)
