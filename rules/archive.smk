# The cycle's archive jobs (config archive.*, docs/archive.md): arch after the cycle's steps and, with an
# ensemble, earcNN (a group of members) after the ensemble forecasts that write them; all before the cycle's
# cleanup (rules/cycle.smk waits for them), the tarballs go to the archive tier. Slurm resources (one task, one
# CPU, memory, runtime from the tarballs' bytes) come from the arm's settings (workflow/slurm.py), as the steps'.
from cycleio.config.calendar import ARCHIVE_JOB
from cycleio.workflow.slurm import rule_resources


rule archive_cycle:
    input:
        archive_dependencies,
    output:
        manifest=step_file("{arm}", "{cycle}", "{step}", "manifest.json"),
        records=step_file("{arm}", "{cycle}", "{step}", "records.jsonl"),
    log:
        out("logs", "{arm}", "{cycle}", "{step}.log"),
    wildcard_constraints:
        step=ARCHIVE_JOB,
    conda:
        "../envs/cycleio.yaml"
    threads: 1
    resources:
        **rule_resources(STUDY.arms),
        io_lock=1,
        attempt=lambda wildcards, attempt: attempt,
    params:
        settings=job_settings(),
    message:
        "{wildcards.step}: cycle {wildcards.cycle} of arm {wildcards.arm} to the archive tier"
    shell:
        "python -m cycleio --log {log:q} archive --arm-settings {params.settings:q} --cycle {wildcards.cycle}"
        " --job {wildcards.step}"
        " --attempt {resources.attempt} --records {output.records:q} --manifest {output.manifest:q}"
        " --manifests {input:q}"
