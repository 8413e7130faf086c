#!/usr/bin/env bash
# Read-only GPU check for a lent GPU machine (the `device` tool): what nvidia-smi sees, and
# gpucluster-healthcheck's burn-in by hand (`--level quick|standard --json`, no Slurm call),
# without healthcheck.conf and with two of our own: one declaring what this node has (expected to
# pass), one declaring 8 GPUs of another model and driver (expected to fail, naming each).
# Changes no GPU setting (no MIG, clocks, persistence mode or reset).
# Usage, from the repository root: OUT=<folder> bash scripts/device_gpu_check.sh
set -u
out=${OUT:?set OUT to a folder for the results}
record() {
  local name=$1
  shift
  echo "\$ $*" >"$out/$name.txt"
  timeout 120 "$@" >>"$out/$name.txt" 2>&1
  echo "exit $?" >>"$out/$name.txt"
}
record smi-list nvidia-smi -L
record smi-query nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,pcie.link.width.current,pcie.link.width.max --format=csv,noheader,nounits
record smi-mig nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader
record smi-nvlink nvidia-smi nvlink --status
record tools sh -c 'for t in dcgmi nv-hostengine nvidia-imex-ctl all_reduce_perf ibstat; do printf "%s: " "$t"; command -v "$t" || echo none; done; ls /dev/nvidia*; uname -r'

program=gpucluster/programs/gpucluster_healthcheck.py
for level in quick standard; do
  timeout 400 python3 "$program" --level "$level" --json >"$out/burn-in-$level.json" 2>&1
  echo "exit $?" >>"$out/burn-in-$level.json"
done

# The node as declared: name, GPU count, devices, model and driver as nvidia-smi reports them.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
count=$(nvidia-smi -L | grep -c '^GPU ')
devices=$(for ((i = 0; i < count; i++)); do printf '/dev/nvidia%d ' "$i"; done)
declare_node() {
  printf '[declared]\nnodes = %s\nchecks = gpu_count ecc\ngpus = %s\ndevices = %s\nbudget = 50\nheavy_node_state = IDLE\ngpu_model = %s\ndriver = %s\npcie_width = 16\nnvlink = no\nimex = no\n' \
    "$(hostname -s)" "$1" "$2" "$3" "$4" >"$out/$5.conf"
}
declare_node "$count" "$devices" "$name" "$driver" as-found
declare_node 8 "/dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3 /dev/nvidia4 /dev/nvidia5 /dev/nvidia6 /dev/nvidia7" H200 580.95.05 other
for conf in as-found other; do
  timeout 120 python3 "$program" --config "$out/$conf.conf" --node "$(hostname -s)" --level quick --json \
    >"$out/burn-in-$conf.json" 2>&1
  echo "exit $?" >>"$out/burn-in-$conf.json"
done
ls -l "$out"
