"""seed_report.py — the W6/W7 sweep (bench_seed's and bench/peers/seed_torch.py's JSON) as one table and, with
--plot, charts: for each network, the speed ratio (peer ms / spikefuse ms) and the memory ratio (spikefuse peak /
peer peak) against T, one line per peer, precision (spikefuse bf16 against the peer under autocast bf16) and
spikefuse memory mode (recompute, lean).

Usage: seed_report.py FILE.json ... [--markdown OUT.md] [--plot DIR]
The table goes to stdout (and OUT.md); W6 rows also say whether Liang et al.'s ratios over plain PyTorch (≥2.13×
speed at ≤0.41× memory without BN, ≥1.94× at ≤0.33× with BN) and 1.8× SpikingJelly cupy are met. --plot needs
matplotlib (Debian python3-matplotlib): it is imported only then, so the table runs anywhere (CI's smoke test).
Exit status 1 if a file holds no points, a spikefuse point has no peer to compare with, a peer's network has
another parameter count than spikefuse's (then they did not build the same layers), or two memory modes of one CPU
point end at different losses."""
import argparse
import json
import os
import sys

# Liang et al.'s headline ratios over plain PyTorch, with and without BN: (speed at least, memory at most)
PAPER = {True: (1.94, 0.33), False: (2.13, 0.41)}
SJ_CUPY_TARGET = 1.8


def load(paths):
    """spikefuse's points by (workload, net, T, precision, memory mode), the peers' by the first four."""
    ours, peers = {}, {}
    for path in paths:
        doc = json.load(open(path))
        points = doc["points"]
        if not points:
            sys.exit(f"{path}: no points")
        for p in points:
            key = (p["workload"], p["net"], p["T"], p["precision"])
            if p["impl"] == "spikefuse":
                p["device"] = doc.get("device")  # the run's, for unequal_modes
                ours[key + (p.get("memory", "recompute"),)] = p
            else:
                peers.setdefault(key, {})[p["impl"]] = p
    return ours, peers


def ratios(ours, peer):
    """(speed, memory) of spikefuse against one peer point, None where either did not run."""
    if not (ours.get("ok") and peer.get("ok")):
        return None
    mem = ours["peak_mib"] / peer["peak_mib"] if peer.get("peak_mib") else float("nan")  # none on the CPU
    return peer["ms"] / ours["ms"], mem


def verdict(p, impl, r):
    if r is None or p["workload"] != "W6" or p.get("width_div", 1) != 1:  # the targets are for the real sizes
        return ""
    if impl == "torch" and p["precision"] == "fp32":
        speed, mem = PAPER[p["bn"]]
        return " met" if r[0] >= speed and r[1] <= mem else " MISSED"
    if impl == "sj_cupy":
        return " met" if r[0] >= SJ_CUPY_TARGET else " MISSED"
    return ""


def mismatches(ours, peers):
    """Points where a peer's network has another parameter count than spikefuse's: not the same network."""
    out = []
    for key, p in ours.items():
        for impl, q in peers.get(key[:4], {}).items():
            if "params" in p and "params" in q and p["params"] != q["params"]:
                out.append(f"{'/'.join(map(str, key))} {impl}: {q['params']} parameters, spikefuse {p['params']}")
    return out


def unequal_modes(ours):
    """CPU points whose memory modes end at different losses: the modes compute the same steps, bitwise on the CPU
    (on a GPU each net times its own convolution algorithms, so the sums may run in another order)."""
    out = []
    for key, p in ours.items():
        ref = ours.get(key[:4] + ("recompute",))
        if p.get("device") == "cpu" and ref and p.get("ok") and ref.get("ok") and p["last_loss"] != ref["last_loss"]:
            out.append(f"{'/'.join(map(str, key))}: loss {p['last_loss']!r}, recompute's {ref['last_loss']!r}")
    return out


def table(ours, peers):
    lines = ["| workload | net | T | B | precision | memory | spikefuse ms | peak MiB | peer | peer ms | "
             "peer peak MiB | speed × | memory × |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lonely = 0
    for key in sorted(ours):
        p = ours[key]
        mine = f"{p['ms']:.2f} | {p['peak_mib']:.0f}" if p.get("ok") else f"failed: {p.get('error', '?')} |"
        impls = peers.get(key[:4], {})
        if not impls:
            lonely += 1
            impls = {"(none)": {}}
        for impl, q in sorted(impls.items()):
            r = ratios(p, q)
            theirs = f"{q['ms']:.2f} | {q['peak_mib']:.0f}" if q.get("ok") else f"{q.get('error', '—')[:60]} |"
            rs = f"{r[0]:.2f}{verdict(p, impl, r)} | {r[1]:.2f}" if r else "— | —"
            lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {p['B']} | {key[3]} | {key[4]} | {mine} | {impl} | "
                         f"{theirs} | {rs} |")
    return lines, lonely


def plot(ours, peers, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(outdir, exist_ok=True)
    nets = sorted({(k[0], k[1]) for k in ours})
    for wl in sorted({n[0] for n in nets}):
        names = [n[1] for n in nets if n[0] == wl]
        fig, axes = plt.subplots(2, len(names), figsize=(max(8.0, 3.2 * len(names)), 6.5), squeeze=False)
        colors = {}  # one colour per peer, solid fp32, dashed bf16
        for col, name in enumerate(names):
            series = {}
            for key, p in ours.items():
                if key[:2] != (wl, name):
                    continue
                for impl, q in peers.get(key[:4], {}).items():
                    r = ratios(p, q)
                    if r:
                        mode = "" if key[4] == "recompute" else f" {key[4]}"
                        series.setdefault(f"{impl} {key[3]}{mode}", []).append((key[2], r))
            for label, pts in sorted(series.items()):
                pts.sort()
                Ts = [t for t, _ in pts]
                impl = label.split()[0]
                c = colors.setdefault(impl, f"C{len(colors)}")
                style = dict(color=c, linestyle="--" if " bf16" in label else "-",
                             marker="s" if label.endswith(("lean", "full")) else "o", label=label)
                axes[0][col].plot(Ts, [r[0] for _, r in pts], **style)
                axes[1][col].plot(Ts, [r[1] for _, r in pts], **style)
            bn = next(p["bn"] for k, p in ours.items() if k[:2] == (wl, name))
            if wl == "W6":  # Liang et al.'s own ratios over plain PyTorch
                axes[0][col].axhline(PAPER[bn][0], color="black", linestyle=":", linewidth=1)
                axes[1][col].axhline(PAPER[bn][1], color="black", linestyle=":", linewidth=1)
            axes[0][col].set_title(name)
            axes[0][col].axhline(1.0, color="grey", linewidth=0.5)
            axes[1][col].axhline(1.0, color="grey", linewidth=0.5)
            axes[1][col].set_xlabel("T")
        axes[0][0].set_ylabel("speed: peer ms / spikefuse ms")
        axes[1][0].set_ylabel("memory: spikefuse / peer peak")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize="small")
        fig.suptitle(f"{wl}: spikefuse against each peer (solid fp32, dashed bf16 autocast; squares: memory = lean"
                     + ("; dotted: Liang et al.'s ratios)" if wl == "W6" else ")"))
        fig.tight_layout(rect=(0, 0.12, 1, 1))
        path = os.path.join(outdir, f"seed_{wl.lower()}.png")
        fig.savefig(path, dpi=110)
        print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--markdown")
    ap.add_argument("--plot")
    a = ap.parse_args()
    ours, peers = load(a.files)
    lines, lonely = table(ours, peers)
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    if a.plot:
        plot(ours, peers, a.plot)
    if lonely:
        print(f"{lonely} spikefuse points have no peer point", file=sys.stderr)
    wrong = mismatches(ours, peers)
    for m in wrong:
        print("not the same network: " + m, file=sys.stderr)
    apart = unequal_modes(ours)
    for m in apart:
        print("memory modes disagree: " + m, file=sys.stderr)
    sys.exit(1 if lonely or wrong or apart or not ours else 0)


if __name__ == "__main__":
    main()
