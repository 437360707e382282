# Aggregation: all records into tidy tables, figures from the tables.
import json

from cycleio.report.captions import answer_numbers


rule aggregate:
    input:
        manifests=measured_files("manifest.json"),
    output:
        events=report(
            out("tables", "io_events.parquet"),
            category=REPORT["data"],
            subcategory="tables",
            caption="../report/io_events.rst",
        ),
        events_csv=out("tables", "io_events.csv"),
        summary=report(
            out("tables", "step_summary.csv"),
            category=REPORT["time"],
            subcategory="tables",
            caption="../report/step_summary.rst",
        ),
        throughput=report(
            out("tables", "phase_throughput.csv"),
            category=REPORT["staging"],
            subcategory="tables",
            caption="../report/phase_throughput.rst",
        ),
        staging=report(
            out("tables", "staging.csv"),
            category=REPORT["staging"],
            subcategory="tables",
            caption="../report/staging.rst",
        ),
        tiers=report(
            out("tables", "tiers.csv"),
            category=REPORT["data"],
            subcategory="tables",
            caption="../report/tiers.rst",
        ),
        retries=report(
            out("tables", "retries.csv"),
            category=REPORT["data"],
            subcategory="tables",
            caption="../report/retries.rst",
        ),
    log:
        out("logs", "aggregate.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        # each job writes its records before its manifest, so the manifests stand for both as inputs (half the
        # files for Snakemake to plan)
        records=measured_files("records.jsonl"),
        n_files=lambda wildcards, input: len(input.manifests),
        arms_dir=lambda wildcards: out("arms"),  # where jobs keep failed attempts (not files Snakemake tracks)
        numbers=numbers,
    message:
        "aggregating {params.n_files} record files into tables"
    shell:
        "python -m cycleio --log {log:q} aggregate --events {output.events:q}"
        " --events-csv {output.events_csv:q} --summary {output.summary:q}"
        " --throughput {output.throughput:q} --staging {output.staging:q} --tiers {output.tiers:q}"
        " --retries {output.retries:q} --arms-dir {params.arms_dir:q}"
        " {params.records:q} --manifests {input.manifests:q}"


rule io_accounting:
    input:
        events=rules.aggregate.output.events,
    output:
        table=report(
            out("tables", "io_accounting.csv"),
            category=REPORT["data"],
            subcategory="tables",
            caption="../report/io_accounting.rst",
        ),
    log:
        out("logs", "io_accounting.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        numbers=numbers,
        # aggregate's inputs: the events table is newer than every one of them
        manifests=measured_files("manifest.json"),
    message:
        "setting each job's records against the kernel's count of its I/O"
    shell:
        "python -m cycleio --log {log:q} io-accounting --events {input.events:q} --out {output.table:q}"
        " --manifests {params.manifests:q}"


# Real jobs' Darshan logs beside the steps they stand for (config darshan.jobs.<name>.stands_for): SURROGATE_LOGS
# (rules/common.smk)
rule surrogate_vs_log:
    input:
        manifests=[request["manifest"] for request in SURROGATE_LOGS],
    output:
        report(
            out("tables", "surrogate_vs_log.csv"),
            category=REPORT["data"],
            subcategory="tables",
            caption="../report/surrogate_vs_log.rst",
        ),
    log:
        out("logs", "surrogate_vs_log.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        comparisons=json.dumps(SURROGATE_LOGS),
        n=len(SURROGATE_LOGS),
    message:
        "setting {params.n} real jobs' Darshan logs beside the steps they stand for"
    shell:
        "python -m cycleio --log {log:q} surrogate-vs-log --comparisons {params.comparisons:q} --out {output:q}"


rule inventory:
    output:
        report(
            out("tables", "inventory.csv"),
            category=REPORT["data"],
            subcategory="tables",
            caption="../report/inventory.rst",
        ),
    log:
        out("logs", "inventory.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        study=lambda wildcards: STUDY.inventory_json(),
        numbers=numbers,
    shell:
        "python -m cycleio --log {log:q} inventory-table --study-json {params.study:q} --out {output:q}"


rule figures:
    input:
        summary=rules.aggregate.output.summary,
        throughput=rules.aggregate.output.throughput,
    output:
        png=report(
            out("figures", "throughput_by_arm_and_phase.png"),
            category=REPORT["staging"],
            subcategory="figures",
            caption="../report/throughput_figure.rst",
        ),
        svg=out("figures", "throughput_by_arm_and_phase.svg"),
    log:
        out("logs", "figures.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        title=STUDY.title(f"{STUDY.grid}, {len(STUDY.cycles)} cycles"),
        numbers=numbers,
    shell:
        "python -m cycleio --log {log:q} figures --summary {input.summary:q}"
        " --throughput {input.throughput:q} --out {output.png:q} {output.svg:q} --title {params.title:q}"


rule write_strategy_figure:
    input:
        events=rules.aggregate.output.events,
        summary=rules.aggregate.output.summary,
        answers=out("summary.csv"),  # rules/answers.smk: the numbers of the caption
    output:
        png=report(
            out("figures", "write_strategies.png"),
            category=REPORT["strategy"],
            subcategory="figures",
            caption="../report/write_strategies.rst",
        ),
        svg=out("figures", "write_strategies.svg"),
    log:
        out("logs", "write_strategy_figure.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        title=STUDY.title(f"forecast write strategies, {STUDY.grid}"),
        answer=lambda wildcards, input: answer_numbers(input.answers),
    shell:
        "python -m cycleio --log {log:q} write-figure --events {input.events:q}"
        " --summary {input.summary:q} --out {output.png:q} {output.svg:q} --title {params.title:q}"
