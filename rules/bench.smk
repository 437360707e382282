# Benchmarks on every tier: IOR/mdtest (or fio's equivalents) and field I/O, one job per tier x
# pattern x nodes x tasks (a job over N nodes for N > 1); then the benchmarks, efficiency and I/O gap tables (the steps' paired replays run
# inside their jobs, see cycleio.benchmarks.paired) and figures. The plan (points, their settings and CSV paths) lives in cycleio.benchmarks.tierbench; its
# errors name the key. The rules name the tables and figures.
# STUDY.bench is that plan, built and checked with the study.
from cycleio.report.captions import answer_numbers


rule bench_point:
    output:
        rows=out("bench", "{tier}", "{kind}", "{pattern}.{shape}.csv"),
        raw=directory(out("bench", "{tier}", "{kind}", "{pattern}.{shape}.raw")),
    log:
        out("logs", "bench", "{tier}", "{kind}", "{pattern}.{shape}.log"),
    benchmark:
        out("benchmarks", "bench", "{tier}", "{kind}", "{pattern}.{shape}.tsv")
    wildcard_constraints:
        kind="io|metadata",
        pattern=r"[A-Za-z0-9][A-Za-z0-9_]*",
        shape=r"(N[0-9]+\.)?n[0-9]+",
    conda:
        "../envs/cycleio.yaml"
    resources:
        **STUDY.bench.rule_resources(),
        io_lock=1,
    params:
        settings=lambda wildcards: STUDY.bench.point_json(
            wildcards.kind, wildcards.tier, wildcards.pattern, wildcards.shape
        ),
        what=lambda wildcards: STUDY.bench.describe(wildcards.shape),
    message:
        "{wildcards.kind} benchmark {wildcards.pattern} on tier {wildcards.tier}, {params.what}"
    shell:
        "python -m cycleio --log {log:q} bench --settings {params.settings:q}"
        " --out {output.rows:q} --raw {output.raw:q}"


rule bench_fieldio:
    output:
        rows=out("bench", "{tier}", "fieldio", "n{ntasks}.csv"),
        raw=directory(out("bench", "{tier}", "fieldio", "n{ntasks}.raw")),
    log:
        out("logs", "bench", "{tier}", "fieldio", "n{ntasks}.log"),
    benchmark:
        out("benchmarks", "bench", "{tier}", "fieldio", "n{ntasks}.tsv")
    conda:
        "../envs/cycleio.yaml"
    resources:
        **STUDY.bench.rule_resources(),
        io_lock=1,
    params:
        settings=lambda wildcards: STUDY.bench.point_json(
            "fieldio", wildcards.tier, "fields", wildcards.ntasks
        ),
    message:
        "field I/O on tier {wildcards.tier}, {wildcards.ntasks} tasks"
    shell:
        "python -m cycleio --log {log:q} bench --settings {params.settings:q}"
        " --out {output.rows:q} --raw {output.raw:q}"


rule benchmark_tables:
    input:
        points=STUDY.bench.point_files(out),
        events=rules.aggregate.output.events,
    output:
        table=report(
            out("tables", "benchmarks.csv"),
            category=REPORT["scale"],
            subcategory="tables",
            caption="../report/bench_table.rst",
        ),
        parquet=out("tables", "benchmarks.parquet"),
        efficiency=report(
            out("tables", "efficiency.csv"),
            category=REPORT["efficiency"],
            subcategory="tables",
            caption="../report/bench_efficiency.rst",
        ),
        io_gap=report(
            out("tables", "io_gap.csv"),
            category=REPORT["efficiency"],
            subcategory="tables",
            caption="../report/io_gap_table.rst",
        ),
    log:
        out("logs", "benchmark_tables.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        n_points=lambda wildcards, input: len(input.points),
        numbers=numbers,
        min_bytes=STUDY.config["benchmarks"]["replay"]["min_bytes"],
        min_seconds=STUDY.config["benchmarks"]["replay"]["min_seconds"],
        tolerance=STUDY.config["benchmarks"]["replay"]["tolerance"],
    message:
        "benchmark tables from {params.n_points} benchmark points and the paired replays"
    shell:
        "python -m cycleio --log {log:q} bench-tables --events {input.events:q}"
        " --benchmarks {output.table:q} --benchmarks-parquet {output.parquet:q}"
        " --efficiency {output.efficiency:q} --io-gap {output.io_gap:q}"
        " --min-bytes {params.min_bytes:q} --min-seconds {params.min_seconds}"
        " --tolerance {params.tolerance} {input.points:q}"


rule scaling_fit:
    input:
        table=rules.benchmark_tables.output.table,
    output:
        report(
            out("tables", "scaling_fit.csv"),
            category=REPORT["scale"],
            subcategory="tables",
            caption="../report/scaling_fit.rst",
        ),
    log:
        out("logs", "scaling_fit.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        numbers=numbers,
    shell:
        "python -m cycleio --log {log:q} scaling-fit --benchmarks {input.table:q} --out {output:q}"


rule benchmark_figures:
    input:
        table=rules.benchmark_tables.output.table,
        fits=rules.scaling_fit.output[0],
    output:
        scaling=report(
            out("figures", "benchmark_scaling.png"),
            category=REPORT["scale"],
            subcategory="figures",
            caption="../report/bench_scaling.rst",
        ),
        scaling_svg=out("figures", "benchmark_scaling.svg"),
    log:
        out("logs", "benchmark_figures.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        title=STUDY.title("benchmarks on the tiers"),
        answer=lambda wildcards, input: answer_numbers(None, input.fits),
        numbers=numbers,
    shell:
        "python -m cycleio --log {log:q} bench-figures --table {input.table:q}"
        " --fits {input.fits:q} --scaling {output.scaling:q} {output.scaling_svg:q}"
        " --title {params.title:q}"


# Only in a study that runs field I/O (benchmarks.fieldio.enabled): rules/common.smk benchmark_outputs
rule fieldio_figure:
    input:
        table=rules.benchmark_tables.output.table,
    output:
        png=report(
            out("figures", "fieldio_vs_ior.png"),
            category=REPORT["efficiency"],
            subcategory="figures",
            caption="../report/bench_fieldio.rst",
        ),
        svg=out("figures", "fieldio_vs_ior.svg"),
    log:
        out("logs", "fieldio_figure.log"),
    conda:
        "../envs/cycleio.yaml"
    params:
        title=STUDY.title("field I/O on the tiers"),
        numbers=numbers,
    shell:
        "python -m cycleio --log {log:q} bench-figures --table {input.table:q}"
        " --fieldio {output.png:q} {output.svg:q} --title {params.title:q}"
