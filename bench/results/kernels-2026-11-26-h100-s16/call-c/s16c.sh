#!/bin/bash
# session 16, call C: bench_reduce of three binaries: b (71f80c2, the block/cluster policy), tile
# (straight-line tiles in one block and the cluster), key (tile + 4-byte arg trees on one 64-bit
# key). Whole arrays to 2^20 alternating, two rounds; to 2^30 and axis 1 once each for b and key;
# test_gpu_kernels and compute-sanitizer over fast (key)
set -u
FINAL=${OUT:-/tmp/out}; O=/tmp/o; mkdir -p $O; trap "tar czf $FINAL/s16c.tgz -C /tmp o" EXIT
t0=$SECONDS
B=$PWD/.devdeps/bin; cp $0 $O/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $O/gpu.txt
for r in 1 2; do for v in b tile key; do
  timeout 120 $B/bench_reduce_$v --sections whole --max-log2 20 --repeats 25 --out $O/whole_${v}_$r.json > $O/whole_${v}_$r.txt 2>&1; echo "$v $r rc=$?"
done; done
echo "small at $((SECONDS-t0)) s"
timeout 200 $B/test_gpu_kernels_key > $O/test_gpu_kernels.log 2>&1; echo "test_gpu_kernels rc=$? $(grep -E 'cases passed' $O/test_gpu_kernels.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 $B/test_gpu_kernels_key > $O/memcheck_kernels.log 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $O/memcheck_kernels.log | tail -1)"
GR_TEST_SMALL=1 GR_TEST_VARIANTS=fast timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_gpu_kernels_key > $O/racecheck_kernels.log 2>&1; echo "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' $O/racecheck_kernels.log | tail -1)"
echo "tests at $((SECONDS-t0)) s"
for v in b key; do
  timeout 200 $B/bench_reduce_$v --sections whole,axis1 --repeats 15 --out $O/all_${v}.json > $O/all_${v}.txt 2>&1; echo "all $v rc=$? at $((SECONDS-t0)) s"
done
python3 - $O <<'PY'
import json,sys,os
o=sys.argv[1]
def load(f,sec='whole'):
    if not os.path.exists(f): return {}
    try: d=json.load(open(f))
    except Exception: return {}
    return {(x['dtype'],x['op'],x['rows'],x['cols']):x for x in d['results'] if x['section']==sec and x['variant']=='fast'}
R={v:[load(f"{o}/whole_{v}_{r}.json") for r in (1,2)] for v in ('b','tile','key')}
print("whole, fast vs CUB, mean of 2 rounds: b | tile | key")
for k in sorted(R['b'][0], key=lambda k:(k[0],k[1],k[3])):
    m=[sum(x[k]['vs_cub'] for x in R[v] if k in x)/2 for v in ('b','tile','key')]
    print("%-8s %-7s 2^%-2d %.2f | %.2f | %.2f" % (k[0],k[1],k[3].bit_length()-1,*m))
for sec in ('whole','axis1'):
    b=load(f"{o}/all_b.json",sec); k=load(f"{o}/all_key.json",sec)
    print(f"{sec} (one round each, vs CUB): b -> key" + ("; % of ceiling" if sec=='axis1' else ""))
    ceil={}
    for v in ('b','key'):
        try: ceil[v]=json.load(open(f"{o}/all_{v}.json"))['hbm_ceiling_gbps']
        except Exception: ceil[v]=1
    for key in sorted(b, key=lambda q:(q[0],q[1],q[3])):
        if key not in k: continue
        if sec=='whole' and key[3] <= (1<<20): continue
        if sec=='axis1':
            print("%-8s %-7s cols 2^%-2d %5.1f%% -> %5.1f%%" % (key[0],key[1],key[3].bit_length()-1,100*b[key]['gbps']/ceil['b'],100*k[key]['gbps']/ceil['key']))
        else:
            print("%-8s %-7s 2^%-2d %.2f -> %.2f" % (key[0],key[1],key[3].bit_length()-1,b[key]['vs_cub'],k[key]['vs_cub']))
PY
echo "done at $((SECONDS-t0)) s"
