"""A tier's burst-buffer request for Slurm (``--bb``), read from its ``burst_buffer`` directives.

It sits with the tiers, below the benchmarks and the workflow, which both ask for it in their jobs'
``slurm_extra`` (workflow.slurm for the cycles' steps, benchmarks.tierbench for the tier benchmarks).
"""

from __future__ import annotations

import re
import shlex


class SlurmResourceError(ValueError):
    """A setting that cannot be turned into a valid Slurm request; the message names the key."""


# What snakemake-executor-plugin-slurm 2.8 refuses in ``slurm_extra`` (it sets these itself), as in its
# validation.get_forbidden_slurm_options(). Kept here because importing the plugin runs `scontrol`,
# which waits long where no Slurm answers; tests/test_slurm_resources.py checks both lists agree.
FORBIDDEN_SLURM_EXTRA = {
    r"--job-name[=\s]|-J\s?": "job name",
    r"--output[=\s]|-o\s": "output file",
    r"--error[=\s]|-e\s": "error file",
    r"--parsable": "parsable output",
    r"--export[=\s]": "environment export",
    r"--comment[=\s]": "job comment",
    r"--workdir[=\s]|-D\s": "working directory",
    r"--account[=\s]|-A\s": "account",
    r"--partition[=\s]|-p\s": "partition",
    r"--mem[=\s]": "memory",
    r"--mem-per-cpu[=\s]": "memory per CPU",
    r"--ntasks[=\s]|-n\s": "number of tasks",
    r"--ntasks-per-gpu[=\s]": "tasks per GPU",
    r"--cpus-per-task[=\s]|-c\s": "CPUs per task",
    r"--cpus-per-gpu[=\s]": "CPUs per GPU",
    r"--time[=\s]|-t\s": "runtime/time limit",
    r"--constraint[=\s]|-C\s": "node constraints",
    r"--qos[=\s]": "quality of service",
    r"--nodes[=\s]|-N\s": "number of nodes",
    r"--clusters[=\s]": "cluster specification",
    r"--gres[=\s]": "generic resources (GRES)",
    r"--gpus[=\s]": "GPU allocation",
}


def forbidden_slurm_extra(text: str) -> str | None:
    """The option the executor plugin would refuse in ``slurm_extra``, or None when it is accepted."""
    for pattern, name in FORBIDDEN_SLURM_EXTRA.items():
        if re.search(pattern, text):
            return name
    return None


def burst_buffer_request(tier) -> str:
    """``--bb '<directives>'`` for a tier with burst-buffer directives, else an empty string.

    Each directive keeps its prefix (``#DW`` for DataWarp, ``#BB_LUA`` for the Lua plugin, or the
    site's ``Directive=``): Slurm ignores a ``--bb`` value without it. Several directives (say
    ``#DW jobdw ...`` and ``#DW stage_in ...``) go one per line, as in a batch script.
    """
    text = getattr(tier, "burst_buffer", "") or ""
    directives = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    if not directives:
        return ""
    key = f"tiers.{tier.name}.burst_buffer"
    for directive in directives:
        if not directive.startswith("#"):
            raise SlurmResourceError(
                f"config key '{key}': {directive!r} lacks the directive prefix; Slurm ignores a burst-buffer "
                "request without it. Expected e.g. '#DW jobdw type=scratch access_mode=striped capacity=200GiB' "
                "or '#BB_LUA pool=mypool capacity=10'"
            )
    request = f"--bb {shlex.quote(chr(10).join(directives))}"
    refused = forbidden_slurm_extra(request)
    if refused:
        raise SlurmResourceError(
            f"config key '{key}': {text!r} holds what looks like the Slurm {refused} option, which the "
            "Snakemake Slurm plugin refuses in slurm_extra; set it as a resource in the profile instead"
        )
    return request
