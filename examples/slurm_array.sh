#!/usr/bin/env bash
# Cohort feature extraction as a SLURM job array: one shard of the cohort per array task.
#
#   sbatch --array=0-7 examples/slurm_array.sh /shared/cohort.csv /shared/job
#
# Every task runs `wsikit batch --shard I/N` on the same job folder (a shared file system seen
# by every node at the same path). The shards are balanced by size: tile counts when the job
# folder already holds patch grids (e.g. after a first `--steps segment,patch` array), else
# file sizes. The first task to start stores the plan in JOB/shards/plan-N-*.json and every
# other task reads it, so no slide is in two shards. Outputs, per-slide states, locks and
# manifest rows are per slide or per shard: tasks never write the same file. A failed or
# pre-empted task is simply resubmitted (`sbatch --array=3 ...`): finished slides are skipped.
#
# Afterwards:  wsikit batch status /shared/job           (per-shard progress)
#              wsikit batch status /shared/job --json    (with the per-slide manifest)
#
# Not run in CI (it needs a SLURM cluster); `bash -n examples/slurm_array.sh` checks syntax.
#SBATCH --job-name=wsikit-batch
#SBATCH --cpus-per-task=8
#SBATCH --gres=gpu:1
#SBATCH --mem=32G
#SBATCH --time=12:00:00
#SBATCH --output=logs/%x-%A_%a.out
set -euo pipefail

COHORT=${1:?usage: sbatch --array=0-(N-1) slurm_array.sh COHORT.csv JOBDIR}
JOB=${2:?usage: sbatch --array=0-(N-1) slurm_array.sh COHORT.csv JOBDIR}
# SLURM_ARRAY_TASK_COUNT is the number of tasks; shards are 0-based, so use --array=0-(N-1).
# (With --array=1-N pass $((SLURM_ARRAY_TASK_ID - 1)) instead.)
SHARD="${SLURM_ARRAY_TASK_ID:?run me with sbatch --array}/${SLURM_ARRAY_TASK_COUNT}"

# Lock heartbeats are refreshed every few seconds; a task killed by SLURM leaves a lock that
# another task may break after --stale-after seconds without heartbeat.
srun wsikit batch "$COHORT" --out "$JOB" --shard "$SHARD" \
    --steps segment,patch,features --encoder conch_v1_5 \
    --devices cuda --workers 1 --loader-workers "${SLURM_CPUS_PER_TASK:-4}" \
    --stale-after 900 --no-progress
# Exit code: 0 no slide failed, 1 some slide failed (see `wsikit batch status`), 2 usage error.
