# Issue 30, as a user runs it: a table with an `id` column trains with --ignore-columns id, and
# predict passes the id through (--keep-columns id) before the class and its probabilities
# (--class-and-probabilities), one CSV; evaluate takes --ignore-columns too. Then the early-stop
# message of a resumed run names the best step, before the resume where it was.
# Run with -DMINITRAIN=... -DFIXTURES=... -DWORK=...
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "'${ARGN}' failed with ${code}\nstdout: ${out}\nstderr: ${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# The fixture with an id column in front ("r,1": a comma, so RFC 4180 quotes it on the way out).
file(STRINGS "${FIXTURES}/classes_small.csv" rows)
set(table "")
set(i 0)
foreach(row IN LISTS rows)
  if(i EQUAL 0)
    string(APPEND table "id,${row}\n")
  else()
    string(APPEND table "\"r,${i}\",${row}\n")
  endif()
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${WORK}/t.csv" "${table}")

set(common --data "${WORK}/t.csv" --target-columns colour --loss cross_entropy --model mlp:2,8,3
    --epochs 20 --batch-size 10 --device cpu --progress none)
run("${MINITRAIN}" train ${common} --lr 0.05 --ignore-columns id --save "${WORK}/w.safetensors")
run("${MINITRAIN}" predict --weights "${WORK}/w.safetensors" --input "${WORK}/t.csv"
    --output "${WORK}/p.csv" --keep-columns id --class-and-probabilities)
file(STRINGS "${WORK}/p.csv" lines)
list(GET lines 0 header)
list(GET lines 1 first)
if(NOT header STREQUAL "id,colour,blue,green,red" OR NOT first MATCHES "^\"r,1\",red,[0-9.e-]+,[0-9.e-]+,[0-9.e-]+$")
  message(FATAL_ERROR "predict --keep-columns id --class-and-probabilities wrote:\n${header}\n${first}")
endif()
run("${MINITRAIN}" evaluate --weights "${WORK}/w.safetensors" --data "${WORK}/t.csv"
    --ignore-columns id)
if(NOT out MATCHES "\"accuracy\":")
  message(FATAL_ERROR "evaluate --ignore-columns id: ${out}")
endif()

# Early stopping across a resume: lr 0 never lowers val_loss after the first evaluation (step 1),
# so --early-stop 3 ends the run after step 4, and says the best was step 1. Resumed, the run
# trains nothing: it says so (once "the checkpoint is already at step <total>", which it was not)
# and that the best lies before the resume.
run("${MINITRAIN}" train ${common} --ignore-columns id --lr 0 --val-split 0.25 --eval-every 1
    --early-stop 3 --checkpoint-dir "${WORK}/ck" --checkpoint-every 1)
if(NOT out MATCHES "early stop: no lower val_loss in 3 evaluation\\(s\\) in a row; stopped after step 4 of [0-9]+; the best, val_loss [0-9.e-]+, was at step 1\n")
  message(FATAL_ERROR "early stop message:\n${out}")
endif()
run("${MINITRAIN}" train ${common} --ignore-columns id --lr 0 --val-split 0.25 --eval-every 1
    --early-stop 3 --checkpoint-dir "${WORK}/ck" --checkpoint-every 1 --resume)
if(NOT out MATCHES "done: the checkpoint at step 4 of [0-9]+ is of a run that early stopping ended; nothing to train"
   OR NOT out MATCHES "the best, val_loss [0-9.e-]+, was at step 1 \\(before the resume from step 4\\)")
  message(FATAL_ERROR "a resumed early-stopped run says:\n${out}")
endif()
