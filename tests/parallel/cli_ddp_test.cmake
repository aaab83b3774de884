# `minitrain train --parallel ddp` as a user runs it, under mpirun, against one device. Usage:
#   cmake -DMINITRAIN=... -DTOOL=ddp_test_tool -DMPIEXEC=mpirun -DWORK=dir -DCASE=name [-DNP=N] -P cli_ddp_test.cmake
# CASE:
#   equal    NP ranks x batch 4 save the weights of one device with batch NP*4 (no shuffle); so do
#            the ring all-reduce and --no-overlap.
#   accum    the same with --grad-accum 2 on both sides (all but a step's last batch under no_sync).
#   hybrid   NP ranks, each a pipeline of 2 stages (--stages 2 --micro-batches 2), vs one device.
#   weighted --sample-weights: NP ranks split the weighted draw; equals one device's global batch.
#   files    rank 0 alone prints, writes --save and the checkpoint (with world_size in it); each
#            rank writes its own log (rank r: .rank<r> before the extension).
#   resume   2 ranks x 4 stop at step 6; 1 rank x 8 resumes and ends equal to the uninterrupted
#            2-rank run; 1 rank x 4 (another global batch) is refused naming both layouts.
#   localsgd --sync-every 1 with plain SGD equals DDP's weights (within float32 rounding: averaged
#            parameters instead of averaged gradients); --sync-every 4 with Adam and
#            --sync-optimizer-state ends with one model on every rank (the run checks it after the
#            last averaging), and stopped at a checkpoint (step 6, not a multiple of 4: averaged
#            there, moments too) then resumed on the ranks ends bit-identical to the uninterrupted run;
#            --sync-every 1 on the hybrid (--stages 2) equals DDP's weights too.
#   errors   a failing rank's error line names the rank; --backend without --parallel ddp and
#            --backend nccl for CPU ranks are refused, saying what to do.
#   config   ranks started with their own flags (MPMD: `mpirun -n 1 ... : -n 1 ...`): a different
#            --lr, or --seed, is refused before the first step, the differing rank naming the flag
#            and both values, and nothing is written; different --progress (per process) is fine.
#   validation --val-data of 7 rows (not a multiple of NP): each rank evaluates its own rows, the
#            sums are all-reduced, and every val_loss equals the one-device run's; val_rows is 7
#            (no padded duplicate counted); --save-best keeps the one-device run's best weights, and
#            --early-stop ends every rank after the same step.
#   precision --precision bf16 and fp16 (plain SGD, lr 0.03: its steps show gradient differences as they
#            are): NP ranks end nearer the one-device 16-bit run than a quarter of its distance from
#            float32 (each rank rounds its own share of a gradient to 16 bits), fp16 ranks skip the
#            one-device run's steps (forced to overflow), the hybrid runs bf16 too, and
#            --grad-reduce-dtype bf16 halves the gradient bytes at a cost below the same bound.
#   cuda     (label gpu) one NCCL rank per GPU vs one GPU; reports SKIP without a GPU.
#   mpi_gpu  (label gpu) NP ranks with --device cuda --backend mpi (GPU tensors staged through
#            pinned host memory, no NCCL; emulated GPUs do) vs one CPU device with the global
#            batch; then the same in bf16 with --grad-reduce-dtype bf16 (16-bit sums through
#            MPI's staging) near the CPU bf16 run; reports SKIP without a GPU.
#   hybrid_gpu (label gpu) NP ranks, each a pipeline of 2 stages on cuda:0 and cuda:1 (--backend mpi:
#            one communicator per stage, split from the rank's, on that stage's GPU), vs one CPU
#            device with the global batch; the same with stages on cuda:0 and the CPU (auto takes
#            mpi), and with --sync-every 1 and plain SGD; --backend nccl with a CPU stage is refused
#            saying what to do. Reports SKIP with fewer than 2 GPUs.
# The data (synthetic:96) is a multiple of NP*4 for NP = 2 and 3, so every batch is full on
# both sides and the sums differ only in float32 rounding.

set(quiet --progress none)
set(common --model mlp:4,16,16,2 --data synthetic:96 --no-shuffle --device cpu --optimizer adam --lr 0.01 --seed 3)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
if(NOT NP)
  set(NP 2)
endif()
math(EXPR global_batch "${NP} * 4")

# run(NAME OUT args...): runs a command, fails the test on a non-zero exit; OUT gets its output.
function(run out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT code EQUAL 0)
    string(REPLACE ";" " " line "${ARGN}")
    message(FATAL_ERROR "exit ${code}: ${line}\nstdout: ${out}\nstderr: ${err}")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

function(ddp_run out_var np)
  run(out ${MPIEXEC} -n ${np} ${MINITRAIN} train --parallel ddp ${common} ${ARGN})
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# skip_unless_gpus(N): on a machine with fewer than N CUDA devices the case ends here, reporting
# SKIP (a failure under MINITRAIN_REQUIRE_GPU=1); otherwise `gpus` is their number. A macro, so
# that its return() ends the script.
macro(skip_unless_gpus n)
  run(info ${MINITRAIN} info)
  if(NOT info MATCHES "GPUs: ([0-9]+)\n" OR CMAKE_MATCH_1 LESS ${n})
    if("$ENV{MINITRAIN_REQUIRE_GPU}" STREQUAL "1")
      message(FATAL_ERROR "MINITRAIN_REQUIRE_GPU=1 but fewer than ${n} CUDA device(s) (${info})")
    endif()
    message(STATUS "SKIP: needs ${n} CUDA device(s) (${info})")
    return()
  endif()
  set(gpus ${CMAKE_MATCH_1})
endmacro()

# Weights within float32 rounding: sums over ranks vs one GEMM, over 24 Adam steps (as
# tests/parallel/cli_parallel_test.cpp compares --parallel dp).
function(same_weights got want)
  run(out ${TOOL} compare ${got} ${want} 1e-6 1e-5)
  message(STATUS "${out}")
endfunction()

if(CASE STREQUAL "equal")
  run(one ${MINITRAIN} train ${common} ${quiet} --epochs 2 --batch-size ${global_batch} --save ${WORK}/one.safetensors)
  ddp_run(out ${NP} --epochs 2 --batch-size 4 --save ${WORK}/ddp.safetensors)
  if(NOT out MATCHES "distributed data parallel: ${NP} ranks \\(mpi, native all-reduce.*global batch ${global_batch}\\)")
    message(FATAL_ERROR "no ddp info line for ${NP} ranks:\n${out}")
  endif()
  same_weights(${WORK}/ddp.safetensors ${WORK}/one.safetensors)
  # With --shuffle too: every rank shuffles alike and takes every N-th row of the epoch's order,
  # so a global batch holds the rows of the one-device batch of the same index.
  string(REPLACE "--no-shuffle" "--shuffle" shuffled "${common}")
  run(one ${MINITRAIN} train ${shuffled} ${quiet} --epochs 2 --batch-size ${global_batch}
      --save ${WORK}/one_shuffled.safetensors)
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${shuffled} ${quiet} --epochs 2 --batch-size 4
      --save ${WORK}/ddp_shuffled.safetensors)
  same_weights(${WORK}/ddp_shuffled.safetensors ${WORK}/one_shuffled.safetensors)
  # The ring all-reduce gives the same weights too.
  ddp_run(out ${NP} --epochs 2 --batch-size 4 --all-reduce ring --bucket-size 1KiB --save ${WORK}/ring.safetensors)
  same_weights(${WORK}/ring.safetensors ${WORK}/one.safetensors)
  # --no-overlap: every bucket all-reduced after backward, the same sums.
  ddp_run(out ${NP} --epochs 2 --batch-size 4 --bucket-size 1KiB --no-overlap --save ${WORK}/no_overlap.safetensors)
  if(NOT out MATCHES "buckets of 1KiB all-reduced after backward")
    message(FATAL_ERROR "--no-overlap not in the ddp info line:\n${out}")
  endif()
  same_weights(${WORK}/no_overlap.safetensors ${WORK}/one.safetensors)
elseif(CASE STREQUAL "accum")
  run(one ${MINITRAIN} train ${common} ${quiet} --epochs 2 --grad-accum 2 --batch-size ${global_batch}
      --save ${WORK}/one.safetensors)
  ddp_run(out ${NP} --epochs 2 --grad-accum 2 --batch-size 4 --save ${WORK}/ddp.safetensors)
  same_weights(${WORK}/ddp.safetensors ${WORK}/one.safetensors)
elseif(CASE STREQUAL "hybrid")
  run(one ${MINITRAIN} train ${common} ${quiet} --epochs 2 --batch-size ${global_batch} --save ${WORK}/one.safetensors)
  ddp_run(out ${NP} --stages 2 --micro-batches 2 --epochs 2 --batch-size 4 --save ${WORK}/hybrid.safetensors)
  if(NOT out MATCHES "on cpu,cpu: .*distributed data parallel: ${NP} ranks")
    message(FATAL_ERROR "no hybrid info line:\n${out}")
  endif()
  same_weights(${WORK}/hybrid.safetensors ${WORK}/one.safetensors)
elseif(CASE STREQUAL "precision")
  string(REPLACE "--optimizer;adam;--lr;0.01" "--optimizer;sgd;--lr;0.03" sgd "${common}")
  foreach(p fp32 bf16 fp16)
    run(one ${MINITRAIN} train ${sgd} ${quiet} --epochs 4 --batch-size ${global_batch} --precision ${p}
        --save ${WORK}/one_${p}.safetensors)
  endforeach()
  foreach(p bf16 fp16)
    run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd} ${quiet} --epochs 4 --batch-size 4
        --precision ${p} --save ${WORK}/ddp_${p}.safetensors)
    if(NOT out MATCHES "${p} mixed precision")
      message(FATAL_ERROR "no ${p} in the ddp info line:\n${out}")
    endif()
    run(out ${TOOL} nearer ${WORK}/ddp_${p}.safetensors ${WORK}/one_${p}.safetensors ${WORK}/one_fp32.safetensors 0.25)
    message(STATUS "${p}: ${out}")
  endforeach()
  # fp16 forced to overflow: every rank skips the same steps (the all-reduced gradients carry one
  # rank's inf to all). Not the one-device run's steps: as in torch, each rank's backward starts
  # from its own batch's mean loss, so its per-row gradients are NP times the one-device run's and
  # overflow at a scale NP times smaller (with NP = 2: from 2^16 on where one device fits 2^17).
  set(overflow --precision fp16 --loss-scale 268435456 --loss-scale-growth-interval 3)
  run(one ${MINITRAIN} train ${sgd} ${quiet} --epochs 4 --batch-size ${global_batch} ${overflow} --log ${WORK}/one.jsonl)
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd} ${quiet} --epochs 4 --batch-size 4 ${overflow}
      --log ${WORK}/ddp.jsonl)
  file(STRINGS ${WORK}/one.jsonl one_lines)
  file(STRINGS ${WORK}/ddp.jsonl ddp_lines)
  file(STRINGS ${WORK}/ddp.rank1.jsonl rank1_lines)
  foreach(lines one_lines ddp_lines rank1_lines)
    set(skips_${lines} "")
    foreach(line IN LISTS ${lines})
      string(JSON step GET "${line}" step)
      string(JSON skipped ERROR_VARIABLE none GET "${line}" skipped)
      if(skipped STREQUAL "ON" OR skipped STREQUAL "true")
        list(APPEND skips_${lines} ${step})
      endif()
    endforeach()
  endforeach()
  list(LENGTH skips_one_lines n_skips)
  list(LENGTH skips_ddp_lines n_ddp_skips)
  if(n_skips LESS 5 OR n_ddp_skips LESS 5 OR NOT skips_ddp_lines STREQUAL skips_rank1_lines)
    message(FATAL_ERROR "skipped steps: one device ${skips_one_lines}, rank 0 ${skips_ddp_lines}, rank 1 ${skips_rank1_lines}")
  endif()
  message(STATUS "fp16 skipped steps: ${skips_ddp_lines} on every rank (one device: ${skips_one_lines})")
  # The hybrid: every rank a pipeline of 2 stages, in bf16.
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd} ${quiet} --epochs 4 --batch-size 4
      --precision bf16 --stages 2 --save ${WORK}/hybrid_bf16.safetensors)
  run(out ${TOOL} nearer ${WORK}/hybrid_bf16.safetensors ${WORK}/one_bf16.safetensors ${WORK}/one_fp32.safetensors 0.25)
  # Gradients reduced in bfloat16 (float32 training): not the exact average, but near it.
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd} ${quiet} --epochs 4 --batch-size 4
      --grad-reduce-dtype bf16 --save ${WORK}/ddp_fp32_bf16_reduce.safetensors)
  if(NOT out MATCHES "gradients reduced in bf16")
    message(FATAL_ERROR "no grad-reduce-dtype in the info line:\n${out}")
  endif()
  run(out ${TOOL} nearer ${WORK}/ddp_fp32_bf16_reduce.safetensors ${WORK}/one_fp32.safetensors ${WORK}/one_bf16.safetensors 0.5)
  message(STATUS "bf16 gradient reduction: ${out}")
elseif(CASE STREQUAL "weighted")
  run(out ${TOOL} weights ${WORK}/w.npy 96)
  run(one ${MINITRAIN} train ${common} ${quiet} --epochs 2 --batch-size ${global_batch} --sample-weights ${WORK}/w.npy
      --save ${WORK}/one.safetensors)
  ddp_run(out ${NP} --epochs 2 --batch-size 4 --sample-weights ${WORK}/w.npy --save ${WORK}/ddp.safetensors)
  same_weights(${WORK}/ddp.safetensors ${WORK}/one.safetensors)
  # Not the unweighted run's weights: the weights changed which rows were trained on.
  run(plain ${MINITRAIN} train ${common} ${quiet} --epochs 2 --batch-size ${global_batch} --save ${WORK}/plain.safetensors)
  execute_process(COMMAND ${TOOL} compare ${WORK}/ddp.safetensors ${WORK}/plain.safetensors 1e-6 1e-5
                  RESULT_VARIABLE code OUTPUT_QUIET)
  if(code EQUAL 0)
    message(FATAL_ERROR "--sample-weights made no difference to the weights")
  endif()
elseif(CASE STREQUAL "files")
  ddp_run(out ${NP} --steps 7 --batch-size 4 --progress lines --checkpoint-dir ${WORK}/ckpt --checkpoint-every 3
          --log ${WORK}/metrics.jsonl --save ${WORK}/w.safetensors)
  string(REGEX MATCHALL "training mlp" info_lines "${out}")
  string(REGEX MATCHALL "step 1/7" progress_lines "${out}")
  string(REGEX MATCHALL "done: steps 1-7" done_lines "${out}")
  list(LENGTH info_lines n_info)
  list(LENGTH progress_lines n_progress)
  list(LENGTH done_lines n_done)
  if(NOT n_info EQUAL 1 OR NOT n_progress EQUAL 1 OR NOT n_done EQUAL 1)
    message(FATAL_ERROR "expected one info line, one progress line for step 1 and one done line (rank 0 only), "
                        "got ${n_info}, ${n_progress}, ${n_done}:\n${out}")
  endif()
  foreach(f ckpt/checkpoint.safetensors w.safetensors metrics.jsonl)
    if(NOT EXISTS ${WORK}/${f})
      message(FATAL_ERROR "${f} was not written")
    endif()
  endforeach()
  math(EXPR last "${NP} - 1")
  foreach(r RANGE 1 ${last})
    file(STRINGS ${WORK}/metrics.rank${r}.jsonl lines)
    list(LENGTH lines n)
    if(NOT n EQUAL 7)
      message(FATAL_ERROR "metrics.rank${r}.jsonl has ${n} lines, expected 7")
    endif()
  endforeach()
  file(STRINGS ${WORK}/metrics.jsonl lines)
  list(GET lines 0 first)
  if(NOT first MATCHES "\"step\":1,")
    message(FATAL_ERROR "metrics.jsonl does not start at step 1: ${first}")
  endif()
  # Every rank logs the global batch's loss (the all-reduced mean), the same number on all.
  foreach(r RANGE 1 ${last})
    file(STRINGS ${WORK}/metrics.rank${r}.jsonl rank_lines)
    foreach(i 0 6)
      list(GET lines ${i} a)
      list(GET rank_lines ${i} b)
      string(REGEX MATCH "\"loss\":[^,]*" loss_a "${a}")
      string(REGEX MATCH "\"loss\":[^,]*" loss_b "${b}")
      if(NOT loss_a OR NOT loss_a STREQUAL loss_b)
        message(FATAL_ERROR "line ${i}: rank 0 logged ${loss_a}, rank ${r} ${loss_b}")
      endif()
    endforeach()
  endforeach()
  file(GLOB leftovers ${WORK}/ckpt/.* ${WORK}/ckpt/*.tmp*)
  if(leftovers)
    message(FATAL_ERROR "temporary files left beside the checkpoint: ${leftovers}")
  endif()
  run(world ${TOOL} metadata ${WORK}/ckpt/checkpoint.safetensors world_size)
  run(samples ${TOOL} metadata ${WORK}/ckpt/checkpoint.safetensors samples_seen)
  math(EXPR want_samples "7 * ${global_batch}")
  if(NOT world MATCHES "^${NP}\n" OR NOT samples MATCHES "^${want_samples}\n")
    message(FATAL_ERROR "checkpoint metadata: world_size '${world}', samples_seen '${samples}'; expected ${NP} "
                        "and ${want_samples}")
  endif()
elseif(CASE STREQUAL "resume")
  ddp_run(out 2 --steps 12 --batch-size 4 --save ${WORK}/full.safetensors)
  ddp_run(out 2 --steps 6 --batch-size 4 --checkpoint-dir ${WORK}/ckpt --log ${WORK}/m.jsonl)
  # Another global batch (1 rank x 4 instead of 2 x 4) is refused, naming both layouts.
  execute_process(COMMAND ${MINITRAIN} train ${common} ${quiet} --steps 12 --batch-size 4 --resume
                          --checkpoint-dir ${WORK}/ckpt
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(code EQUAL 0 OR NOT err MATCHES "written by 2 rank\\(s\\) x --batch-size 4 \\(global batch 8\\), this run has 1 rank\\(s\\) x --batch-size 4 \\(global batch 4\\).*use --batch-size 8 on 1 rank")
    message(FATAL_ERROR "a resume with another global batch was not refused as expected (exit ${code}):\n${err}")
  endif()
  # The same global batch on 1 rank continues where the 2 ranks stopped.
  run(out ${MINITRAIN} train ${common} ${quiet} --steps 12 --batch-size 8 --resume --checkpoint-dir ${WORK}/ckpt
      --save ${WORK}/resumed.safetensors)
  if(NOT out MATCHES "resuming after step 6")
    message(FATAL_ERROR "the 1-rank run did not resume:\n${out}")
  endif()
  same_weights(${WORK}/resumed.safetensors ${WORK}/full.safetensors)
elseif(CASE STREQUAL "localsgd")
  string(REPLACE "--optimizer;adam;--lr;0.01" "--optimizer;sgd;--lr;0.05" sgd "${common}")
  if(sgd STREQUAL common)
    message(FATAL_ERROR "the plain SGD flags were not substituted into: ${common}")
  endif()
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd} ${quiet} --epochs 2 --batch-size 4
      --save ${WORK}/ddp.safetensors)
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd} ${quiet} --epochs 2 --batch-size 4
      --sync-every 1 --save ${WORK}/k1.safetensors)
  if(NOT out MATCHES "local SGD: parameters averaged every 1 step")
    message(FATAL_ERROR "no local SGD info line:\n${out}")
  endif()
  same_weights(${WORK}/k1.safetensors ${WORK}/ddp.safetensors)
  # The hybrid averages each stage's parameters too.
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd} ${quiet} --epochs 2 --batch-size 4
      --stages 2 --sync-every 1 --save ${WORK}/hybrid_k1.safetensors)
  same_weights(${WORK}/hybrid_k1.safetensors ${WORK}/ddp.safetensors)
  # A checkpoint is a sync point: the uninterrupted run checkpoints at step 6 as well.
  set(k4 --batch-size 4 --sync-every 4 --sync-optimizer-state --checkpoint-every 6)
  ddp_run(out ${NP} --steps 12 ${k4} --checkpoint-dir ${WORK}/full --save ${WORK}/k4.safetensors)
  if(NOT out MATCHES "every 4 steps with the optimizer moments")
    message(FATAL_ERROR "no local SGD info line:\n${out}")
  endif()
  # Not DDP any more: the ranks drift between averagings.
  execute_process(COMMAND ${TOOL} compare ${WORK}/k4.safetensors ${WORK}/ddp.safetensors 1e-6 1e-5
                  RESULT_VARIABLE code OUTPUT_QUIET ERROR_QUIET)
  if(code EQUAL 0)
    message(FATAL_ERROR "--sync-every 4 gave DDP's weights")
  endif()
  ddp_run(out ${NP} --steps 6 ${k4} --checkpoint-dir ${WORK}/ckpt)
  ddp_run(out ${NP} --steps 12 ${k4} --checkpoint-dir ${WORK}/ckpt --resume --save ${WORK}/resumed.safetensors)
  if(NOT out MATCHES "resuming after step 6")
    message(FATAL_ERROR "the local SGD run did not resume:\n${out}")
  endif()
  run(out ${TOOL} compare ${WORK}/resumed.safetensors ${WORK}/k4.safetensors 0 0)
elseif(CASE STREQUAL "cuda")
  # NCCL: one rank per GPU (mpirun carries the NCCL id), against one GPU with the global batch.
  run(info ${MINITRAIN} info)
  if(info MATCHES "emulated GPUs")
    message(STATUS "SKIP: needs NCCL on real GPUs (these are emulated)")
    return()
  endif()
  skip_unless_gpus(1)
  string(REPLACE "--device cpu" "--device cuda" on_gpu "${common}")
  math(EXPR gpu_batch "${gpus} * 4")
  run(one ${MINITRAIN} train ${on_gpu} ${quiet} --epochs 2 --batch-size ${gpu_batch} --save ${WORK}/one.safetensors)
  run(out ${MPIEXEC} -n ${gpus} ${MINITRAIN} train --parallel ddp ${on_gpu} ${quiet} --epochs 2 --batch-size 4
      --save ${WORK}/ddp.safetensors)
  if(NOT out MATCHES "distributed data parallel: ${gpus} rank.* \\(nccl")
    message(FATAL_ERROR "not an NCCL run:\n${out}")
  endif()
  same_weights(${WORK}/ddp.safetensors ${WORK}/one.safetensors)
elseif(CASE STREQUAL "mpi_gpu")
  skip_unless_gpus(1)
  string(REPLACE "--device cpu" "--device cuda" on_gpu "${common}")
  run(one ${MINITRAIN} train ${common} ${quiet} --epochs 2 --batch-size ${global_batch} --save ${WORK}/one.safetensors)
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${on_gpu} --backend mpi --epochs 2 --batch-size 4
      --save ${WORK}/ddp.safetensors)
  if(NOT out MATCHES "distributed data parallel: ${NP} ranks \\(mpi")
    message(FATAL_ERROR "not an MPI run on GPU ranks:\n${out}")
  endif()
  same_weights(${WORK}/ddp.safetensors ${WORK}/one.safetensors)
  # bf16 on GPU ranks, gradients summed in bfloat16 by MPI (through the pinned staging).
  string(REPLACE "--optimizer;adam;--lr;0.01" "--optimizer;sgd;--lr;0.03" sgd_gpu "${on_gpu}")
  string(REPLACE "--optimizer;adam;--lr;0.01" "--optimizer;sgd;--lr;0.03" sgd_cpu "${common}")
  foreach(p fp32 bf16)
    run(one ${MINITRAIN} train ${sgd_cpu} ${quiet} --epochs 2 --batch-size ${global_batch} --precision ${p}
        --save ${WORK}/one_${p}.safetensors)
  endforeach()
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd_gpu} --backend mpi --epochs 2 --batch-size 4
      --precision bf16 --grad-reduce-dtype bf16 --save ${WORK}/ddp_bf16.safetensors)
  run(out ${TOOL} nearer ${WORK}/ddp_bf16.safetensors ${WORK}/one_bf16.safetensors ${WORK}/one_fp32.safetensors 0.5)
  message(STATUS "bf16 GPU ranks: ${out}")
elseif(CASE STREQUAL "hybrid_gpu")
  skip_unless_gpus(2)
  string(REPLACE "--device cpu" "--device cuda" on_gpu "${common}")
  set(gpu_stages --backend mpi --stages 2 --micro-batches 2 --epochs 2 --batch-size 4)
  run(one ${MINITRAIN} train ${common} ${quiet} --epochs 2 --batch-size ${global_batch} --save ${WORK}/one.safetensors)
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${on_gpu} --devices cuda:0,cuda:1 ${gpu_stages}
      --save ${WORK}/hybrid.safetensors)
  if(NOT out MATCHES "on cuda:0,cuda:1: .*distributed data parallel: ${NP} ranks \\(mpi.*model parallel: 2 stages")
    message(FATAL_ERROR "no hybrid info line on cuda:0,cuda:1:\n${out}")
  endif()
  same_weights(${WORK}/hybrid.safetensors ${WORK}/one.safetensors)
  # A stage on a GPU and one on the CPU: auto takes mpi, whose communicators take both.
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${on_gpu} --devices cuda:0,cpu --stages 2
      --micro-batches 2 --epochs 2 --batch-size 4 --save ${WORK}/mixed.safetensors)
  if(NOT out MATCHES "on cuda:0,cpu: .*distributed data parallel: ${NP} ranks \\(mpi")
    message(FATAL_ERROR "the GPU and CPU stages did not run over mpi:\n${out}")
  endif()
  same_weights(${WORK}/mixed.safetensors ${WORK}/one.safetensors)
  # Local SGD averages each stage's parameters on its own GPU: with plain SGD and K = 1 it is DDP.
  string(REPLACE "--optimizer;adam;--lr;0.01" "--optimizer;sgd;--lr;0.05" sgd_gpu "${on_gpu}")
  string(REPLACE "--optimizer;adam;--lr;0.01" "--optimizer;sgd;--lr;0.05" sgd_cpu "${common}")
  run(one ${MINITRAIN} train ${sgd_cpu} ${quiet} --epochs 2 --batch-size ${global_batch} --save ${WORK}/one_sgd.safetensors)
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${sgd_gpu} --devices cuda:0,cuda:1 ${gpu_stages}
      --sync-every 1 --save ${WORK}/hybrid_k1.safetensors)
  same_weights(${WORK}/hybrid_k1.safetensors ${WORK}/one_sgd.safetensors)
  execute_process(COMMAND ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${on_gpu} --devices cuda:0,cpu
                          --stages 2 --steps 2 --batch-size 4 --backend nccl
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(code EQUAL 0 OR NOT "${out}${err}" MATCHES "--backend nccl exchanges GPU tensors only, but --devices cuda:0,cpu puts stage 1 on cpu; use --backend mpi")
    message(FATAL_ERROR "--backend nccl with a CPU stage was not refused (exit ${code}):\n${out}${err}")
  endif()
elseif(CASE STREQUAL "validation")
  # 4 features, 2 targets, 7 rows.
  file(WRITE ${WORK}/val.csv "a,b,c,d,t1,t2\n0.1,0.2,0.3,0.4,0.5,-0.5\n-0.3,0.9,0.1,-0.2,0.1,0.2\n"
       "0.5,0.5,-0.5,0.7,-0.4,0.3\n0.9,-0.1,0.2,0.0,0.6,0.6\n-0.7,-0.6,0.4,0.3,-0.2,0.1\n"
       "0.3,0.0,-0.9,0.8,0.0,-0.7\n-0.2,0.4,0.6,-0.5,0.3,0.4\n")
  # A held-out table goes with a training table (the target columns are named once).
  run(out ${TOOL} table ${WORK}/train.csv 96 4 2)
  string(REPLACE "synthetic:96" "${WORK}/train.csv" table "${common}")
  set(val --target-columns t1,t2 --val-data ${WORK}/val.csv --eval-every 5)
  run(one ${MINITRAIN} train ${table} ${quiet} ${val} --epochs 2 --batch-size ${global_batch}
      --log ${WORK}/one.jsonl --save ${WORK}/one.safetensors --save-best ${WORK}/one_best.safetensors)
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${table} ${quiet} ${val} --epochs 2
      --batch-size 4 --log ${WORK}/ddp.jsonl --save ${WORK}/ddp.safetensors
      --save-best ${WORK}/ddp_best.safetensors)
  if(NOT out MATCHES "held out \\(7 rows\\): val_loss")
    message(FATAL_ERROR "no held-out line for 7 rows:\n${out}")
  endif()
  file(STRINGS ${WORK}/one.jsonl one_lines)
  file(STRINGS ${WORK}/ddp.jsonl ddp_lines)
  set(evaluations 0)
  foreach(a b IN ZIP_LISTS one_lines ddp_lines)
    string(JSON va ERROR_VARIABLE none GET "${a}" val_loss)
    string(JSON vb ERROR_VARIABLE none_b GET "${b}" val_loss)
    if(none AND none_b)
      continue()
    endif()
    string(JSON rows GET "${b}" val_rows)
    if(NOT rows EQUAL 7)
      message(FATAL_ERROR "ddp evaluated ${rows} rows, not 7: ${b}")
    endif()
    run(close ${TOOL} close ${va} ${vb} 1e-5)
    math(EXPR evaluations "${evaluations} + 1")
  endforeach()
  if(evaluations LESS 4)
    message(FATAL_ERROR "expected evaluations in both logs, found ${evaluations}")
  endif()
  same_weights(${WORK}/ddp_best.safetensors ${WORK}/one_best.safetensors)
  # Early stopping decides alike on every rank (a rank that went on alone would hang the job):
  # with lr 0 no evaluation after the first is lower, so 2 more end the run after step 3.
  string(REPLACE "--lr;0.01" "--lr;0" frozen "${table}")
  run(out ${MPIEXEC} -n ${NP} ${MINITRAIN} train --parallel ddp ${frozen} ${quiet} --target-columns
      t1,t2 --val-data ${WORK}/val.csv --eval-every 1 --early-stop 2 --epochs 2 --batch-size 4
      --checkpoint-dir ${WORK}/ck)
  if(NOT out MATCHES "early stop: no lower val_loss in 2 evaluation\\(s\\) in a row; stopped after step 3 of")
    message(FATAL_ERROR "ddp early stop did not end the run after step 3:\n${out}")
  endif()
elseif(CASE STREQUAL "errors")
  execute_process(COMMAND ${MPIEXEC} -n 2 ${MINITRAIN} train --parallel ddp ${common} --steps 2
                          --log /proc/minitrain-no-such-dir/m.jsonl
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  # Every rank fails the same check, but mpirun may stop the job after the first one reports it,
  # so any rank's line will do.
  if(code EQUAL 0 OR NOT "${out}${err}" MATCHES "rank [01]: minitrain: error: --log:? .*minitrain-no-such-dir")
    message(FATAL_ERROR "expected each rank's error prefixed with its rank (exit ${code}):\n${out}${err}")
  endif()
  execute_process(COMMAND ${MINITRAIN} train ${common} --steps 2 --backend mpi
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(code EQUAL 0 OR NOT "${out}${err}" MATCHES "--backend mpi picks the communicator of --parallel ddp")
    message(FATAL_ERROR "--backend without --parallel ddp was not refused (exit ${code}):\n${out}${err}")
  endif()
  execute_process(COMMAND ${MPIEXEC} -n 2 ${MINITRAIN} train --parallel ddp ${common} --steps 2 --backend nccl
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(code EQUAL 0 OR NOT "${out}${err}" MATCHES "nccl backend works on GPU tensors.*--backend mpi")
    message(FATAL_ERROR "--backend nccl for CPU ranks was not refused (exit ${code}):\n${out}${err}")
  endif()
elseif(CASE STREQUAL "config")
  # ${common} without --lr and --seed, which each rank gets below
  set(base --model mlp:4,16,16,2 --data synthetic:96 --no-shuffle --device cpu --optimizer adam --steps 2)
  foreach(flag_values "--lr;0.01;0.02;--seed;3" "--seed;3;4;--lr;0.01")
    list(GET flag_values 0 flag)
    list(GET flag_values 1 a)
    list(GET flag_values 2 b)
    list(GET flag_values 3 same_flag)
    list(GET flag_values 4 same)
    execute_process(COMMAND ${MPIEXEC} -n 1 ${MINITRAIN} train --parallel ddp ${base} ${quiet} ${same_flag} ${same}
                              ${flag} ${a} --save ${WORK}/w.safetensors
                            : -n 1 ${MINITRAIN} train --parallel ddp ${base} ${quiet} ${same_flag} ${same}
                              ${flag} ${b} --save ${WORK}/w.safetensors
                    RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
    if(code EQUAL 0 OR NOT "${out}${err}" MATCHES "rank 1: minitrain: error: rank 1 was started with another configuration than rank 0: ${flag} \"?${b}\"? \\(rank 0: \"?${a}\"?\\)")
      message(FATAL_ERROR "ranks with ${flag} ${a} and ${b} were not refused naming it (exit ${code}):\n${out}${err}")
    endif()
    if(EXISTS ${WORK}/w.safetensors OR "${out}" MATCHES "step [0-9]+/")
      message(FATAL_ERROR "a step ran or --save was written before the refusal:\n${out}${err}")
    endif()
  endforeach()
  run(out ${MPIEXEC} -n 1 ${MINITRAIN} train --parallel ddp ${common} --steps 2 --progress none
          : -n 1 ${MINITRAIN} train --parallel ddp ${common} --steps 2 --progress lines)
else()
  message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
