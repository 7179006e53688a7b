#!/bin/bash
# Create COUNT fake GPUs as character devices DIR/nvidia0..COUNT-1 (major 195, like NVIDIA's).
# Slurm needs character devices: with regular files it leaves CUDA_VISIBLE_DEVICES empty
# (docs/design.md, "GPUs and gres.conf"). Idempotent. Usage: fakegpu.sh DIR COUNT
set -euo pipefail
dir=$1; count=$2
mkdir -p "$dir"
for i in $(seq 0 $((count - 1))); do
  [ -c "$dir/nvidia$i" ] || { rm -f "$dir/nvidia$i"; mknod "$dir/nvidia$i" c 195 "$i"; }
done
