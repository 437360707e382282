"""storage.bbrequest: a tier's burst-buffer directives become one quoted --bb option, checked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cycleio.storage.bbrequest import SlurmResourceError, burst_buffer_request


def test_burst_buffer_directive_is_quoted_for_the_shell_and_checked():
    directives = ("  #DW jobdw  capacity=1TiB access_mode=striped type=scratch\n\n"
                  "#DW stage_in source=/lus/in destination=$DW_JOB_STRIPED/in type=directory")
    tier = SimpleNamespace(name="bb", burst_buffer=directives)
    assert burst_buffer_request(tier) == (
        "--bb '#DW jobdw capacity=1TiB access_mode=striped type=scratch\n"
        "#DW stage_in source=/lus/in destination=$DW_JOB_STRIPED/in type=directory'"
    )
    assert burst_buffer_request(SimpleNamespace(name="bb", burst_buffer="")) == ""
    with pytest.raises(SlurmResourceError, match=r"config key 'tiers.bb.burst_buffer'.*prefix"):
        burst_buffer_request(SimpleNamespace(name="bb", burst_buffer="pool=localpool capacity=10"))
    with pytest.raises(SlurmResourceError, match="prefix"):
        burst_buffer_request(SimpleNamespace(name="bb", burst_buffer="#DW jobdw capacity=1TiB\nstage_in source=/x"))
    with pytest.raises(SlurmResourceError, match=r"tiers.bb.burst_buffer.*partition"):
        burst_buffer_request(SimpleNamespace(name="bb", burst_buffer="#BB_LUA pool=p -p debug"))
