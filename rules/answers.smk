# The study's answer: the summary (printed at the end of `make study`), the cycle timeline, what staging
# buys, the efficiency heatmap and where a step's storage seconds go (io_gap), the tiers' scaling model and
# the capacity plan. Logic in cycleio.report (answers, answerfigures, closeness, scaling, captions);
# captions are Jinja templates filled from params.answer and params.numbers.
import json
import shlex

from cycleio.report.captions import answer_numbers

if STUDY.bench.enabled:

    rule capacity_plan:
        input:
            benchmarks=rules.benchmark_tables.output.table,
            summary=rules.aggregate.output.summary,
        output:
            report(
                out("capacity.csv"),
                category=REPORT["scale"],
                subcategory="tables",
                caption="../report/capacity.rst",
            ),
        log:
            out("logs", "capacity_plan.log"),
        conda:
            "../envs/cycleio.yaml"
        params:
            study=lambda wildcards: STUDY.capacity_target_json,
            resolution=STUDY.config["plan"]["resolution"],
            interval=STUDY.config["plan"]["interval_hours"]
            or STUDY.config["cycles"]["interval_hours"],
            budget=STUDY.config["plan"]["io_budget_fraction"],
            units=json.dumps(STUDY.config["plan"]["units"]),
            archive="--archive" if STUDY.config["archive"]["enabled"] else "",
            numbers=numbers,
        shell:
            "python -m cycleio --log {log:q} plan --benchmarks {input.benchmarks:q}"
            " --step-summary {input.summary:q} --study-json {params.study:q}"
            " --resolution {params.resolution} --interval-hours {params.interval}"
            " --budget {params.budget} --units {params.units:q} {params.archive} --out {output:q}"


rule summary:
    input:
        summary=rules.aggregate.output.summary,
        tiers=rules.aggregate.output.tiers,
        events=rules.aggregate.output.events,
        efficiency=bench_tables("efficiency"),
        io_gap=bench_tables("io_gap"),
    output:
        report(
            out("summary.csv"),
            category=REPORT["answer"],
            subcategory="per arm",
            caption="../report/summary_table.rst",
        ),
    log:
        out("logs", "summary.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        answer=lambda wildcards, output: answer_numbers(output[0]),
        efficiency=lambda wildcards, input: (
            f"--efficiency {shlex.quote(input.efficiency)}" if input.efficiency else ""
        ),
        io_gap=lambda wildcards, input: (
            f"--io-gap {shlex.quote(input.io_gap)}" if input.io_gap else ""
        ),
    shell:
        "python -m cycleio --log {log:q} summary --step-summary {input.summary:q} --tiers {input.tiers:q}"
        " --events {input.events:q} {params.efficiency} {params.io_gap} --out {output:q}"


rule replay_jobs:
    input:
        replay_job_files(),
    output:
        report(
            out("tables", "replay_jobs.csv"),
            category=REPORT["time"],
            subcategory="tables",
            caption="../report/replay_jobs.rst",
        ),
    log:
        out("logs", "replay_jobs.log"),
    conda:
        "../envs/cycleio.yaml"
    message:
        "the replay jobs' logged and replayed I/O times"
    shell:
        "python -m cycleio --log {log:q} replay-jobs --manifests {input:q} --out {output:q}"


rule summary_md:
    input:
        answers=rules.summary.output[0],
        fits=scaling_fits(),
        capacity=capacity_table(),
        replays=replay_jobs_table(),
    output:
        report(
            out("summary.md"),
            category=REPORT["answer"],
            subcategory="per arm",
            caption="../report/summary.rst",
        ),
    log:
        out("logs", "summary_md.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        title=STUDY.title(),
        model=lambda wildcards, input: (
            f"--fits {shlex.quote(input.fits)} --capacity {shlex.quote(input.capacity)}"
            if input.fits
            else ""
        ),
        replays=lambda wildcards, input: (
            f"--replays {shlex.quote(input.replays)}" if input.replays else ""
        ),
        min_seconds=STUDY.config["benchmarks"]["replay"]["min_seconds"],
        answer=answer,
    shell:
        "python -m cycleio --log {log:q} summary-md --answers {input.answers:q} {params.model} {params.replays}"
        " --min-seconds {params.min_seconds}"
        " --out {output:q} --title {params.title:q} > /dev/null"


rule timeline:
    input:
        events=rules.aggregate.output.events,
        summary=rules.aggregate.output.summary,
        answers=rules.summary.output[0],
    output:
        table=report(
            out("tables", "cycle_timeline.csv"),
            category=REPORT["time"],
            subcategory="tables",
            caption="../report/cycle_timeline_table.rst",
        ),
        png=report(
            out("figures", "cycle_timeline.png"),
            category=REPORT["time"],
            subcategory="figures",
            caption="../report/cycle_timeline.rst",
        ),
        svg=out("figures", "cycle_timeline.svg"),
        share_png=report(
            out("figures", "io_share_by_step.png"),
            category=REPORT["time"],
            subcategory="figures",
            caption="../report/io_share.rst",
        ),
        share_svg=out("figures", "io_share_by_step.svg"),
    log:
        out("logs", "timeline.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        title=STUDY.title(),
        answer=answer,
        numbers=numbers,
    shell:
        "python -m cycleio --log {log:q} timeline --events {input.events:q} --step-summary {input.summary:q}"
        " --out-table {output.table:q} --png {output.png:q} --svg {output.svg:q}"
        " --share-png {output.share_png:q} --share-svg {output.share_svg:q} --title {params.title:q}"


rule staging_figure:
    input:
        summary=rules.aggregate.output.summary,
        answers=rules.summary.output[0],
    output:
        png=report(
            out("figures", "what_staging_buys.png"),
            category=REPORT["staging"],
            subcategory="figures",
            caption="../report/what_staging_buys.rst",
        ),
        svg=out("figures", "what_staging_buys.svg"),
    log:
        out("logs", "staging_figure.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        title=STUDY.title(),
        answer=answer,
    shell:
        "python -m cycleio --log {log:q} answer-figures --step-summary {input.summary:q}"
        " --answers {input.answers:q} --staging-png {output.png:q} --staging-svg {output.svg:q}"
        " --title {params.title:q}"


if STUDY.bench.enabled:

    rule efficiency_heatmap:
        input:
            summary=rules.aggregate.output.summary,
            answers=rules.summary.output[0],
            efficiency=rules.benchmark_tables.output.efficiency,
        output:
            png=report(
                out("figures", "efficiency_heatmap.png"),
                category=REPORT["efficiency"],
                subcategory="figures",
                caption="../report/efficiency_heatmap.rst",
            ),
            svg=out("figures", "efficiency_heatmap.svg"),
        log:
            out("logs", "efficiency_heatmap.log"),
        conda:
            "../envs/cycleio.yaml"
        params:
            title=STUDY.title(),
            numbers=numbers,
        shell:
            "python -m cycleio --log {log:q} answer-figures --step-summary {input.summary:q}"
            " --answers {input.answers:q} --efficiency {input.efficiency:q}"
            " --heatmap-png {output.png:q} --heatmap-svg {output.svg:q} --title {params.title:q}"

    rule io_gap_figure:
        input:
            io_gap=rules.benchmark_tables.output.io_gap,
        output:
            png=report(
                out("figures", "io_gap.png"),
                category=REPORT["efficiency"],
                subcategory="figures",
                caption="../report/io_gap.rst",
            ),
            svg=out("figures", "io_gap.svg"),
        log:
            out("logs", "io_gap_figure.log"),
        conda:
            "../envs/cycleio.yaml"
        params:
            title=STUDY.title(),
            numbers=numbers,
        shell:
            "python -m cycleio --log {log:q} io-gap-figure --io-gap {input.io_gap:q}"
            " --png {output.png:q} --svg {output.svg:q} --title {params.title:q}"
