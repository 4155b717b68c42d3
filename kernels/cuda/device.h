/* CUDA runtime queries the C core needs, as plain C functions. */
#ifndef ENG_KCUDA_DEVICE_H
#define ENG_KCUDA_DEVICE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices the runtime sees; 0 when the query fails (no driver, no GPU). */
int eng_cuda_runtime_device_count(void);

#ifdef __cplusplus
}
#endif
#endif
