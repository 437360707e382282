# The cycled steps of every arm: cold start once, then prep -> anal -> fcst -> post per cycle, and the replay
# jobs from Darshan logs (step darshan_<name>, config darshan.jobs) with their input files laid out once.
# Slurm resources (nodes, tasks, CPUs, memory, runtime, burst buffer) and threads come from each
# arm's settings; each job gets as params only the settings it reads.
# The cycles' jobs are each arm's chain, the study's longest path: they go before the benchmark points
# (CHAIN_PRIORITY), which otherwise hold back the cold starts on a cluster (jobs without inputs are equals).
from cycleio.workflow.slurm import rule_resources, rule_threads

CHAIN_PRIORITY = 10


rule coldstart:
    output:
        manifest=arm_file("{arm}", "coldstart", "manifest.json"),
        records=arm_file("{arm}", "coldstart", "records.jsonl"),
    log:
        out("logs", "{arm}", "coldstart.log"),
    priority: CHAIN_PRIORITY
    conda:
        "../envs/cycleio.yaml"
    resources:
        **rule_resources(STUDY.arms, step="coldstart"),
        io_lock=1,
    params:
        settings=job_settings("coldstart"),
    message:
        "cold start of arm {wildcards.arm}"
    shell:
        "python -m cycleio --log {log:q} coldstart --arm-settings {params.settings:q}"
        " --records {output.records:q} --manifest {output.manifest:q}"


rule darshan_inputs:
    output:
        manifest=arm_file("{arm}", "darshan_inputs", "manifest.json"),
        records=arm_file("{arm}", "darshan_inputs", "records.jsonl"),
    log:
        out("logs", "{arm}", "darshan_inputs.log"),
    priority: CHAIN_PRIORITY
    conda:
        "../envs/cycleio.yaml"
    resources:
        **rule_resources(STUDY.arms, step="darshan_inputs"),
        io_lock=1,
    params:
        settings=job_settings("darshan_inputs"),
    message:
        "the files the replay jobs' Darshan logs read, laid out once for arm {wildcards.arm}"
    shell:
        "python -m cycleio --log {log:q} darshan-inputs --arm-settings {params.settings:q}"
        " --records {output.records:q} --manifest {output.manifest:q}"


rule obs_dump:
    output:
        manifest=step_file("{arm}", "{cycle}", "dump", "manifest.json"),
        records=step_file("{arm}", "{cycle}", "dump", "records.jsonl"),
    log:
        out("logs", "{arm}", "{cycle}", "dump.log"),
    priority: CHAIN_PRIORITY
    conda:
        "../envs/cycleio.yaml"
    resources:
        **rule_resources(STUDY.arms, step="dump"),
        io_lock=1,
    params:
        settings=job_settings("dump"),
    message:
        "observation dumps of cycle {wildcards.cycle} arrive for arm {wildcards.arm}"
    shell:
        "python -m cycleio --log {log:q} dump --arm-settings {params.settings:q} --cycle {wildcards.cycle}"
        " --records {output.records:q} --manifest {output.manifest:q}"


rule cycle_step:
    input:
        step_dependencies,
    output:
        manifest=step_file("{arm}", "{cycle}", "{step}", "manifest.json"),
        records=step_file("{arm}", "{cycle}", "{step}", "records.jsonl"),
    log:
        out("logs", "{arm}", "{cycle}", "{step}.log"),
    priority: CHAIN_PRIORITY
    conda:
        "../envs/cycleio.yaml"
    threads: rule_threads(STUDY.arms)
    resources:
        **rule_resources(STUDY.arms),
        io_lock=1,
        attempt=lambda wildcards, attempt: attempt,
    params:
        settings=job_settings(),
    message:
        "{wildcards.step} of cycle {wildcards.cycle}, arm {wildcards.arm}"
    # a failed attempt's records go beside the manifest (cycleio step's --failed-attempts default)
    shell:
        "python -m cycleio --log {log:q} step --arm-settings {params.settings:q}"
        " --cycle {wildcards.cycle} --step {wildcards.step} --attempt {resources.attempt}"
        " --records {output.records:q} --manifest {output.manifest:q}"


rule cleanup_cycle:
    input:
        cleanup_dependencies,
    output:
        manifest=step_file("{arm}", "{cycle}", "cleanup", "manifest.json"),
        records=step_file("{arm}", "{cycle}", "cleanup", "records.jsonl"),
    log:
        out("logs", "{arm}", "{cycle}", "cleanup.log"),
    priority: 50
    conda:
        "../envs/cycleio.yaml"
    resources:
        io_lock=1,
    params:
        settings=job_settings("cleanup"),
    message:
        "cleanup: cycle {wildcards.cycle} of arm {wildcards.arm} leaves the persistent tier"
    shell:
        "python -m cycleio --log {log:q} cleanup --arm-settings {params.settings:q} --cycle {wildcards.cycle}"
        " --records {output.records:q} --manifest {output.manifest:q}"
