/* Background work and the end of the process. A context's background
 * threads (the builder's and ELU_PREWARM's) call into NVRTC and the driver;
 * a process that ends while one does, its context never destroyed, would
 * tear both libraries down under it (on the H200, a crash at exit). So each
 * piece of background work runs between elu_background_begin and
 * elu_background_end, and at exit the process waits for the piece in
 * flight, and starts no other. */
#ifndef ELU_BACKGROUND_H
#define ELU_BACKGROUND_H

#include <stdbool.h>

/* Whether background work may start: false once the process is exiting,
 * and the thread should then end without calling NVRTC or the driver.
 * When true, the work must end with elu_background_end(). */
bool elu_background_begin(void);
void elu_background_end(void);

#endif
