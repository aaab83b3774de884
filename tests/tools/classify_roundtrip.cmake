# A classifier as a user runs one: tests/fixtures/classes_small.csv (3 colour clusters, text
# labels) trained with cross_entropy and a stratified --val-split, --save-best and --early-stop;
# predict gives class names (and probabilities that sum to 1), evaluate scores accuracy, and a
# model with the wrong number of outputs is refused naming the fix.
# Run with -DMINITRAIN=... -DFIXTURES=... -DWORK=...
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
function(run out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  if(NOT code EQUAL 0)
    string(REPLACE ";" " " line "${ARGN}")
    message(FATAL_ERROR "exit ${code}: ${line}\nstdout: ${out}\nstderr: ${err}")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()
set(table ${FIXTURES}/classes_small.csv)
run(out ${MINITRAIN} train --model mlp:2,16,3 --data ${table} --target-columns colour
    --loss cross_entropy --val-split 0.25 --epochs 150 --batch-size 16 --lr 0.01 --eval-every 10
    --save ${WORK}/w.safetensors --save-best ${WORK}/best.safetensors --early-stop 10
    --log ${WORK}/m.jsonl --progress none)
if(NOT out MATCHES "classes_small.csv \\(45 rows, 15 held out by --val-split 0.25 of --data\\), cross_entropy loss over 3 classes")
  message(FATAL_ERROR "unexpected description:\n${out}")
endif()
if(NOT out MATCHES "held out \\(15 rows\\): val_loss [0-9.e-]+, val_accuracy 1 ")
  message(FATAL_ERROR "the held-out clusters should all be right:\n${out}")
endif()
run(out ${MINITRAIN} predict --weights ${WORK}/best.safetensors --input ${table} --output ${WORK}/p.csv)
file(STRINGS ${WORK}/p.csv classes)
list(GET classes 0 header)
list(GET classes 1 first)
list(GET classes 60 last)
if(NOT header STREQUAL "colour" OR NOT first STREQUAL "red" OR NOT last STREQUAL "blue")
  message(FATAL_ERROR "predict should name the classes: header '${header}', rows '${first}' .. '${last}'")
endif()
run(out ${MINITRAIN} predict --weights ${WORK}/best.safetensors --input ${table} --output ${WORK}/q.csv
    --probabilities)
file(STRINGS ${WORK}/q.csv probabilities)
list(GET probabilities 0 header)
list(GET probabilities 1 row)
if(NOT header STREQUAL "blue,green,red")
  message(FATAL_ERROR "probability columns should be the sorted class names, got '${header}'")
endif()
string(REPLACE "," ";" p "${row}")
list(GET p 2 p_red)
if(NOT p_red GREATER 0.5)
  message(FATAL_ERROR "row 1 is red, but its probabilities are ${row}")
endif()
run(out ${MINITRAIN} evaluate --weights ${WORK}/best.safetensors --data ${table} --device cpu)
if(NOT out MATCHES "^\\{\"rows\":60,\"classes\":3,\"loss\":[0-9.e-]+,\"accuracy\":(1\\.0|0\\.9[0-9]*),\"balanced_accuracy\":")
  message(FATAL_ERROR "unexpected evaluate output: ${out}")
endif()
execute_process(COMMAND ${MINITRAIN} train --model mlp:2,16,4 --data ${table} --target-columns colour
                        --loss cross_entropy --steps 1
                RESULT_VARIABLE code ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(code EQUAL 0 OR NOT err MATCHES "3 classes in column 'colour' but --model mlp:2,16,4 has 4 outputs.*use --model mlp:2,16,3")
  message(FATAL_ERROR "a model with 4 outputs for 3 classes should be refused (exit ${code}): ${err}")
endif()
