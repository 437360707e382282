"""Reading study config keys: the error that names a key, the did-you-mean hint, and the tiers of the
persistent role.

The small part of the config layer that the layers above read without the whole of settings.py:
the benchmark plan (benchmarks.tierbench), sizes.py and the fault checks (workflow.faultcheck).
"""

from __future__ import annotations

import difflib

# Replay jobs from Darshan logs (config ``darshan``): job darshan_<name> in every cycle; DARSHAN_INPUTS, made
# once per arm, lays out the files their logs read on the persistent tier.
DARSHAN_PREFIX = "darshan_"
DARSHAN_INPUTS = "darshan_inputs"  # one of records.ARRIVALS: its records are no cycle's I/O


def is_replay_job(name: str) -> bool:
    """A cycle's replay job (darshan_<name>), not the arm's input-laying job."""
    return name.startswith(DARSHAN_PREFIX) and name != DARSHAN_INPUTS


class ConfigError(ValueError):
    """A study configuration that cannot run; the message names the key and what is expected."""


def unknown_choice(key: str, value, allowed: list[str], what: str) -> ConfigError:
    """``'hrad' is not a pattern (did you mean 'hard'?); expected one of: ...`` for ``key``."""
    close = difflib.get_close_matches(str(value), allowed, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ConfigError(
        f"config key '{key}': {value!r} is not {what}{hint}; expected one of: {', '.join(allowed) or '(none defined)'}"
    )


def persistent_tiers(config: dict) -> list[str]:
    """``persistent_tier`` as a list: one name, or the names a study sweeps."""
    value = config["persistent_tier"]
    return list(value) if isinstance(value, list) else [value]
