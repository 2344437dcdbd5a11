"""Where a parallel test run's wall time goes (issue 17): each xdist
worker's busy seconds and how long it sat idle before the run's end, and
the longest groups, from the timeline `tests/conftest.py` writes.

    KG_TEST_TIMELINE=/tmp/t.tsv KERAS_BACKEND=tensorflow \
        .venv/bin/python -m pytest tests/service -q -n 2 --dist loadgroup
    .venv/bin/python benchmarks/suite_timeline.py /tmp/t.tsv

A worker idle at the end while another still runs a long group says the
groups were handed out in the wrong order (tests/conftest.py's
`_slow_groups_first`).
"""

import argparse
import collections


def read(path):
    rows = []
    with open(path) as log:
        for line in log:
            fields = line.rstrip("\n").split("\t")
            worker, group, start, end = fields[:4]
            # CPU seconds (the worker's own, its reaped children's): absent
            # in timelines written before they were recorded.
            own, children = (fields[4], fields[5]) if len(fields) >= 7 else (0, 0)
            rows.append((worker, group, float(start), float(end), fields[-1], float(own), float(children)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline")
    parser.add_argument("--top", type=int, default=15, help="how many groups to list")
    parser.add_argument("--by-cpu", action="store_true", help="also list the groups using the most CPU")
    args = parser.parse_args()
    rows = read(args.timeline)
    begin = min(r[2] for r in rows)
    end = max(r[3] for r in rows)
    print(f"{len(rows)} tests, first start to last end {end - begin:.0f} s")
    print("| worker | tests | busy s | first start s | last end s | idle at the end s |")
    print("|---|---|---|---|---|---|")
    workers = collections.defaultdict(list)
    for row in rows:
        workers[row[0]].append(row)
    for worker, items in sorted(workers.items()):
        busy = sum(r[3] - r[2] for r in items)
        first, last = min(r[2] for r in items), max(r[3] for r in items)
        print(f"| {worker} | {len(items)} | {busy:.0f} | {first - begin:.0f} | {last - begin:.0f} | "
              f"{end - last:.0f} |")
    own_total = sum(r[5] for r in rows)
    children_total = sum(r[6] for r in rows)
    print(f"CPU seconds: the workers' own {own_total:.0f}, their child processes' {children_total:.0f}")
    groups = collections.defaultdict(lambda: [0.0, None, None, 0, 0.0, 0.0])
    for worker, group, start, stop, _, own, children in rows:
        g = groups[group]
        g[0] += stop - start
        g[1] = worker
        g[2] = start if g[2] is None else min(g[2], start)
        g[3] += 1
        g[4] += own
        g[5] += children
    print(f"\nthe {args.top} longest groups:")
    print("| group | tests | s | CPU s, worker | CPU s, child processes | worker | started at s |")
    print("|---|---|---|---|---|---|---|")
    for group, (seconds, worker, start, count, own, children) in sorted(
        groups.items(), key=lambda kv: -kv[1][0]
    )[: args.top]:
        print(f"| {group} | {count} | {seconds:.0f} | {own:.0f} | {children:.0f} | {worker} | {start - begin:.0f} |")
    if args.by_cpu:
        print(f"\nthe {args.top} groups using the most CPU (worker + child processes):")
        print("| group | tests | CPU s | s | child processes' share |")
        print("|---|---|---|---|---|")
        for group, (seconds, _, _, count, own, children) in sorted(
            groups.items(), key=lambda kv: -(kv[1][4] + kv[1][5])
        )[: args.top]:
            total = own + children
            share = children / total if total else 0
            print(f"| {group} | {count} | {total:.0f} | {seconds:.0f} | {share:.0%} |")


if __name__ == "__main__":
    main()
