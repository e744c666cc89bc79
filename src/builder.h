/* Background work and the end of the process (builder.c): each piece of
 * work a context's background threads do (they call into NVRTC and the
 * driver) runs between elu_background_begin and elu_background_end, and at
 * exit the process waits for the piece in flight, and starts no other. */
#ifndef ELU_BUILDER_H
#define ELU_BUILDER_H

#include <stdbool.h>

/* Whether background work may start: false once the process is exiting,
 * and the thread should then end without calling NVRTC or the driver.
 * When true, the work must end with elu_background_end(). */
bool elu_background_begin(void);
void elu_background_end(void);

#endif
