/*
 * Stand-in for <cuda.h> while generating the cuFile bindings.
 *
 * cufile.h needs only two names from the CUDA driver API: CUresult (an enum in
 * cuda.h, hence a C `unsigned int`) and CUstream (a pointer to an opaque
 * struct). Declaring them here keeps code generation independent of a CUDA
 * toolkit installation and of its version.
 */
#ifndef KVIK_CUDA_SHIM_H
#define KVIK_CUDA_SHIM_H
typedef unsigned int CUresult;
typedef struct CUstream_st *CUstream;
#endif
