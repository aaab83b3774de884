// The one source of a test program none of whose files can hold a gpu case, in a build of the gpu
// cases only (Note [gpu tests only] in cmake/MinitrainHelpers.cmake): GoogleTest's main finds no
// case to run, and ctest registers none.
