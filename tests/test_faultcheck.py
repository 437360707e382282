"""workflow.faultcheck: every entry of the config's faults is checked against the study before any job."""

from __future__ import annotations

import pytest

from conftest import with_changes
from cycleio.config.settings import ConfigError
from cycleio.workflow.study import load_study

CYCLE = "2026010106"


def study_with(default_config, **faults):
    return load_study(with_changes(default_config, faults={**default_config["faults"], **faults}))[1]


@pytest.mark.parametrize("faults, message", [
    ({"fail_step": [{"cycle": CYCLE}]}, r"config key 'faults.fail_step\[0\]': 'step' is a required property"),
    ({"fail_step": [{"cycle": CYCLE, "step": "fcst", "atempt": 2}]},
     r"unknown key 'atempt' \(did you mean 'attempt'\?\) in 'faults.fail_step\[0\]'"),
    ({"fail_step": [{"cycle": CYCLE, "step": "fcst", "attempt": 0}]},
     r"config key 'faults.fail_step\[0\].attempt': 0 is less than the minimum of 1"),
    ({"fail_step": [{"cycle": "2026020100", "step": "fcst"}]},
     r"config key 'faults.fail_step\[0\].cycle': 2026020100 is not a cycle of the study \(2026010100 to 2026010112\)"),
    ({"fail_step": [{"cycle": "2026010100", "step": "prep"}]},
     r"config key 'faults.fail_step\[0\].step': 'prep' does not run in cycle 2026010100; expected one of: fcst, post"),
    ({"fail_step": [{"cycle": CYCLE, "step": "fcst", "arm": "nvme"}]},
     r"config key 'faults.fail_step\[0\].arm': 'nvme' is not an arm of the study; expected one of: lustre, node_local, shm"),
    ({"fail_rank": [{"cycle": CYCLE, "rank": 2}]},
     r"config key 'faults.fail_rank\[0\].rank': 2 is not a rank of arm lustre's forecast, which has 2 \(ranks 0 to 1\)"),
    ({"corrupt_staged_file": [{"cycle": CYCLE, "step": "post", "phase": "stage_up"}]},
     r"config key 'faults.corrupt_staged_file\[0\].phase': 'stage_up' is not allowed; expected one of: stage_in, stage_out"),
    ({"corrupt_staged_file": [{"cycle": CYCLE, "step": "post", "phase": "stage_in", "arm": "lustre"}]},
     r"config key 'faults.corrupt_staged_file\[0\]': arm lustre does not stage its files"),
    ({"fail_stage_out": [{"cycle": CYCLE, "step": "cycle", "after_files": 1}]},
     r"config key 'faults.fail_stage_out\[0\].step': arm node_local runs no job 'cycle' in cycle 2026010106; "
     r"expected one of: prep, anal, fcst, post"),
    ({"fail_stage_out": [{"cycle": CYCLE, "step": "post", "after_files": 10000}]},
     r"config key 'faults.fail_stage_out\[0\].after_files': 10000 is not fewer than the \d+ files post of cycle "
     r"2026010106 stages out \(arm node_local\), so the fault would never fire"),
    ({"fill_tier": [{"cycle": CYCLE, "step": "anal", "leave": "lots"}]},
     r"config key 'faults.fill_tier\[0\].leave': 'lots' does not match"),
    ({"slow_tier": [{"cycle": CYCLE, "step": "anal", "delay_ms": 0}]},
     r"config key 'faults.slow_tier\[0\].delay_ms': 0 is less than or equal to the minimum of 0"),
    ({"fill_tier": [{"cycle": "2026010100", "step": "anal", "leave": 0}]},
     r"config key 'faults.fill_tier\[0\].step': 'anal' does not run in cycle 2026010100; expected one of: fcst, post"),
])
def test_a_bad_fault_is_refused_at_start_naming_the_key(default_config, faults, message):
    with pytest.raises(ConfigError, match=message):
        study_with(default_config, **faults)
