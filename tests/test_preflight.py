"""The checks before any job: an unwritable tier is refused as unwritable, whatever its filesystem."""

from __future__ import annotations

import pytest
import yaml

from cycleio.config.settings import ConfigError, build_study, validate_config
from cycleio.storage.tiers import filesystem_type
from cycleio.workflow.preflight import check_study


@pytest.mark.parametrize("root, fs_type", [("/proc", "proc"), ("/sys", "sysfs")])
def test_a_tier_under_a_kernel_filesystem_is_refused_as_unwritable_not_full(repo, root, fs_type):
    """Before the fix /proc was refused with 'has 0 B free, but the study needs ...' (a space message)."""
    if filesystem_type(root) != fs_type:
        pytest.skip(f"{root} is not {fs_type} here")
    config = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    config["tiers"]["shm"]["path"] = f"{root}/cycleio-{{user}}"
    study = build_study(validate_config(config))
    with pytest.raises(ConfigError) as caught:
        check_study(study)
    message = str(caught.value)
    assert message.startswith(f"tier 'shm': path '{root}/cycleio-")
    assert f"cannot be written: a file cannot be created in {root} ({fs_type}" in message
    assert message.endswith("set tiers.shm.path to a folder this user can write")
    assert "free" not in message and "\n" not in message
