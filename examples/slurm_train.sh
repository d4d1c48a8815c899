#!/bin/bash
# slurm_train.sh — trains a config on several GPU hosts through Slurm: one task per GPU, started by srun (PMIx), each
# taking the GPU of its local rank; rank 0 writes the run directory, which must be on a file system every host sees.
# Usage: sbatch [--nodes=N] examples/slurm_train.sh CONFIG [spikefuse train options...]
#   e.g. sbatch --nodes=2 examples/slurm_train.sh examples/cifar10_vgg9.ini --set train.global_batch=512
# Without srun's PMIx (--mpi=pmix), start with OpenMPI's launcher instead:
#   mpirun -np $SLURM_NTASKS ./build/spikefuse train CONFIG --device cuda
#SBATCH --job-name=spikefuse
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
set -euo pipefail
config=${1:?usage: sbatch examples/slurm_train.sh CONFIG [options]}
shift
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-8}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} # NVLink multicast off on shared hosts
# --kill-on-bad-exit: when one task fails or dies, Slurm ends the others instead of leaving them waiting
srun --mpi=pmix --kill-on-bad-exit=1 ./build/spikefuse train "$config" --device cuda \
    --out "runs/$(basename "$config" .ini)-slurm-$SLURM_JOB_ID" "$@"
