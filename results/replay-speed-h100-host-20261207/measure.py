# as it ran on the device (2026-12-07): alternates builds' replays pinned to 2 cores, prints medians
import json, os, statistics, subprocess, sys, collections
variants = sys.argv[1].split(','); traces = sys.argv[2].split(','); rounds = int(sys.argv[3])
allocator = sys.argv[4] if len(sys.argv) > 4 else 'caching'
res = collections.defaultdict(list)
for r in range(rounds):
    for t in traces:
        for v in variants:
            out = f'/tmp/m-{v}.json'
            binary, _, thp = v.partition('+')
            env = dict(os.environ, GLIBC_TUNABLES='glibc.malloc.hugetlb=1') if thp else None
            subprocess.run(['taskset', '-c', '0,1', f'/tmp/{binary}/build/vrambench', 'replay', t, '--allocator', allocator,
                            '--device', 'sim', '--repetitions', '5', '--out', out], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            es = [b for b in json.load(open(out))['benchmarks'] if b.get('run_type') == 'iteration']
            rates = [e['events'] / (e['cpu_time'] * 1e-9) / 1e6 for e in es]
            res[t, v, 'first'].append(rates[0]); res[t, v, 'median'].append(statistics.median(rates))
for t in traces:
    for v in variants:
        f, m = res[t, v, 'first'], res[t, v, 'median']
        print(f"{os.path.basename(t):>16} {allocator:>10} {v:>12}  first: median {statistics.median(f):5.2f} max {max(f):5.2f}   "
              f"median-of-5: median {statistics.median(m):5.2f} min {min(m):5.2f} max {max(m):5.2f}  ({len(m)} rounds)", flush=True)
