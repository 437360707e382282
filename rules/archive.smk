# The cycle's archive job (config archive.*, docs/archive.md): after the cycle's steps, before its cleanup
# (rules/cycle.smk waits for it), the cycle's tarballs go to the archive tier. Slurm resources (one task, one
# CPU, memory, runtime from the tarballs' bytes) come from the arm's settings (workflow/slurm.py), as the steps'.


rule archive_cycle:
    input:
        archive_dependencies,
    output:
        manifest=step_file("{arm}", "{cycle}", "arch", "manifest.json"),
        records=step_file("{arm}", "{cycle}", "arch", "records.jsonl"),
    log:
        out("logs", "{arm}", "{cycle}", "arch.log"),
    benchmark:
        out("benchmarks", "{arm}", "{cycle}", "arch.tsv")
    conda:
        "../envs/cycleio.yaml"
    threads: 1
    resources:
        **rule_resources(STUDY.arms, step="arch"),
        io_lock=1,
        attempt=lambda wildcards, attempt: attempt,
    params:
        settings=job_settings("arch"),
    message:
        "arch: cycle {wildcards.cycle} of arm {wildcards.arm} to the archive tier"
    shell:
        "python -m cycleio --log {log:q} archive --arm-settings {params.settings:q} --cycle {wildcards.cycle}"
        " --attempt {resources.attempt} --records {output.records:q} --manifest {output.manifest:q}"
        " --manifests {input:q}"
