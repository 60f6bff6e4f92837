#!/usr/bin/env nextflow
// Cohort feature extraction with Nextflow: one process per shard of the cohort.
//
//   nextflow run examples/nextflow/main.nf --cohort /shared/cohort.csv --job /shared/job \
//       --shards 8 --encoder conch_v1_5
//
// Each task runs `wsikit batch --shard I/N` on the same job folder, which must be on a file
// system every executor node sees at the same path (the job folder is the shared state: the
// shard plan, per-slide states, locks and manifests live there). Shards are balanced by tile
// count (when grids exist in the job folder) or file size, and never share a slide. A failed
// task is retried by Nextflow (errorStrategy 'retry'); finished slides are not redone.
// The final process prints `wsikit batch status` over all shards.
//
// Not run in CI (needs Nextflow and, typically, a cluster executor).
nextflow.enable.dsl = 2

params.cohort = null
params.job = null
params.shards = 4
params.encoder = 'heuristic'
params.steps = 'segment,patch,features'
params.devices = 'cpu'

process WSIKIT_SHARD {
    tag "shard ${shard}/${params.shards}"
    cpus 8
    memory '32 GB'
    errorStrategy 'retry'
    maxRetries 2

    input:
    val shard

    output:
    val shard

    script:
    """
    wsikit batch ${params.cohort} --out ${params.job} --shard ${shard}/${params.shards} \
        --steps ${params.steps} --encoder ${params.encoder} --devices ${params.devices} \
        --no-progress || [ \$? -eq 1 ]   # exit 1 = some slides failed: recorded, not fatal
    """
}

process WSIKIT_STATUS {
    input:
    val done

    output:
    stdout

    script:
    """
    wsikit batch status ${params.job}
    """
}

workflow {
    if (!params.cohort || !params.job) {
        error "pass --cohort COHORT.csv --job /shared/JOBDIR"
    }
    shards = Channel.of(0..<(params.shards as int))
    WSIKIT_STATUS(WSIKIT_SHARD(shards).collect()) | view
}
