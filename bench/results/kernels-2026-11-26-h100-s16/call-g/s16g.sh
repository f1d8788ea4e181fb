#!/bin/bash
# session 16, call G: the session's final kernels (730e444): bench_reduce whole arrays 2^10-2^30
# and axis 1, one round; e2e job suites with device "gpu" against the final gpured
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s16g.tgz -C /tmp o" EXIT
t0=$SECONDS
for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/devdeps; done
source .devdeps/env.sh
export PATH=/tmp/devdeps/usr/bin:$PATH PYTHONPATH=/tmp/devdeps/usr/lib/python3/dist-packages
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
timeout 300 $B/bench_reduce_clu --sections whole,axis1 --repeats 25 --out $O/final_all.json > $O/final_all.txt 2>&1; echo "bench rc=$? at $((SECONDS-t0)) s"
one() { n=$(basename $1 .py); timeout 200 python3 $1 > $O/$n.log 2>&1; echo "$n rc=$? $(grep -cE '^FAIL' $O/$n.log) FAIL lines; $(tail -1 $O/$n.log | cut -c1-120)"; }
export -f one; export O
GPURED_BIN=$B/gpured_final GPURED_TEST_DEVICE=gpu timeout 220 bash -c "ls tests/e2e/test_{jobs,results,batch,benchmarks,datasets,launch_groups}.py | xargs -P 4 -I{} bash -c 'one {}'" | sort | tee $O/summary.txt
python3 - $O <<'PY'
import json,sys
o=sys.argv[1]
d=json.load(open(f"{o}/final_all.json")); c=d['hbm_ceiling_gbps']
W={(x['dtype'],x['op'],x['cols']):x for x in d['results'] if x['section']=='whole' and x['variant']=='fast'}
A={(x['dtype'],x['op'],x['cols']):x for x in d['results'] if x['section']=='axis1' and x['variant']=='fast'}
print("whole, fast vs CUB (one round):")
for dt in ('float32','float64','int32'):
    for op in ('sum','max','argmax'):
        print("%-8s %-7s " % (dt,op) + " ".join("%.2f" % W[(dt,op,1<<l)]['vs_cub'] for l in range(10,31)))
print("axis 1, %% of the ceiling (%.0f GB/s), rows of 2^4..2^20:" % c)
for dt in ('float32','float64','int32'):
    for op in ('sum','max','argmax'):
        print("%-8s %-7s " % (dt,op) + " ".join("%.0f" % (100*A[(dt,op,1<<l)]['gbps']/c) for l in range(4,21)))
PY
echo "done at $((SECONDS-t0)) s"
