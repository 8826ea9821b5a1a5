"""`laya-artifacts tune`'s outputs for people: a Markdown table and a PNG of cost against p99 per memory size."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _usd(value: float) -> str:
    return "$%.4f" % value if value < 1 else "$%.2f" % value


def _threads(row: dict[str, Any]) -> str:
    if row["threads"] is None:   # the runtime chose: say what
        return "%s (runtime)" % row.get("ran_with", {}).get("threads", "?")
    return str(row["threads"] or "ort default")


def _spinning(row: dict[str, Any]) -> str:
    spinning = row["spinning"] if row["spinning"] is not None else row.get("ran_with", {}).get("spinning")
    return "?" if spinning is None else ("on" if spinning else "off")


def table(result: dict[str, Any]) -> str:
    """The per-size summary (each size's cheapest configuration), the configurations behind it, and the choice."""
    arches = result["arches"]
    lines = ["| memory MB | vCPUs | config | p50 ms | p99 ms | mean ms | cold ms | restore ms | peak RSS MB | fits | "
             + " | ".join("%s $/1M decisions" % a for a in arches) + " |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|" + "---:|" * len(arches)]
    for size in result["sizes"]:
        costs = " | ".join(_usd(size["cost_per_1m_decisions"][a]) + (" (est.)" if size["estimated"][a] else "")
                           for a in arches)
        lines.append("| %d | %.2f | %s | %.1f | %.1f | %.1f | %.0f | %.1f | %.0f | %s | %s |" % (
            size["memory_mb"], size["vcpus"], size["config"], size["p50_ms"], size["p99_ms"], size["mean_ms"],
            size["cold_ms"], size["restore_ms"], size["peak_rss_mb"], "yes" if size["fits"] else "**no**", costs))
    lines += ["", "Every configuration timed (medians of cold and restore; warm over all rounds):", "",
              "| memory MB | config | threads | spinning | p50 ms | p99 ms | mean ms | cold ms | restore ms | "
              "CPU ms/decision | %s $/1M |" % arches[0], "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for size in result["sizes"]:
        for row in size["configs"]:
            lines.append("| %d | %s | %s | %s | %.1f | %.1f | %.1f | %.0f | %.1f | %.2f | %s |" % (
                size["memory_mb"], row["name"], _threads(row), _spinning(row),
                row["warm_ms"]["p50"], row["warm_ms"]["p99"], row["warm_ms"]["mean"], row["cold_ms"]["p50"],
                row["restore_ms"]["p50"], row["cpu_ms_per_decision"],
                _usd(row["cost"][arches[0]]["usd_per_1m_decisions"])))
    rec = result["recommendation"]
    choice = rec["choice"]
    lines.append("")
    if choice is None:
        lines.append("**Recommendation:** none (%s)." % rec["why"])
    else:
        lines.append("**Recommendation:** %d MB on %s, config `%s`: %s +-%.1f%% per 1M decisions, p99 %.1f ms%s (%s)."
                     % (choice["memory_mb"], choice["arch"], choice["config"], _usd(choice["usd_per_1m_decisions"]),
                        100 * choice.get("noise", 0.0), choice["p99_ms"],
                        ", arm64 time estimated" if choice["estimated"] else "", rec["why"]))
    quota = result["quota"]
    lines.append("CPU quota: %s (%s). Prices of %s; %s" % (quota["mode"], quota["note"], result["prices"]["date"],
                                                       "arm64: " + result["prices"]["arm64_time_basis"]
                                                       if "arm64" in arches else ""))
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> Path:
    """Cost per 1M decisions against warm p99, one point per memory size and architecture (arm64 hollow: its
    time is estimated); sizes that do not fit are crossed."""
    import matplotlib

    matplotlib.use("Agg")   # no display: write the file only
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for arch, style in zip(result["arches"], ("o-", "s--"), strict=False):
        xs, ys = [], []
        for size in result["sizes"]:
            row = next(c for c in size["configs"] if c["name"] == size["config"])
            xs.append(row["cost"][arch]["p99_ms"])
            ys.append(size["cost_per_1m_decisions"][arch])
            axes.annotate("%d MB%s" % (size["memory_mb"], "" if size["fits"] else " (does not fit)"), (xs[-1], ys[-1]),
                          textcoords="offset points", xytext=(5, 5), fontsize=8)
            if not size["fits"]:
                axes.plot([xs[-1]], [ys[-1]], "x", color="red", markersize=10)
        estimated = any(s["estimated"][arch] for s in result["sizes"])
        axes.plot(xs, ys, style, label=arch + (" (time estimated)" if estimated else ""),
                  fillstyle="none" if estimated else "full")
    choice = result["recommendation"]["choice"]
    if choice is not None:
        axes.plot([choice["p99_ms"]], [choice["usd_per_1m_decisions"]], "*", color="gold", markersize=16,
                  markeredgecolor="black", label="recommended")
    slo = result["recommendation"]["slo_p99_ms"]
    if slo is not None:
        axes.axvline(slo, color="grey", linestyle=":", label="p99 SLO %g ms" % slo)
    axes.set_ylim(bottom=0)   # honest axes: a 1% cost difference must look like one
    axes.set_xlim(left=0)
    axes.set_xlabel("warm p99 latency (ms)")
    axes.set_ylabel("USD per 1M decisions")
    artifact = result["artifact"]
    axes.set_title("%s (%s), prices of %s, quota %s" % (artifact.get("checkpoint") or Path(artifact["path"]).name,
                                                       artifact.get("target") or "?", result["prices"]["date"],
                                                       result["quota"]["mode"]), fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
