/* An LLVM module compiled to an object file, written by us rather than by
 * LLVMTargetMachineEmitToFile: LLVM's file stream ends the process
 * ("LLVM ERROR: IO failure on output stream") when a write fails, a full
 * disk or a file-size limit, and tlmc's temporaries stay behind. Here a
 * failed write is an error like any other. */
#ifndef TLM_OBJECT_FILE_H
#define TLM_OBJECT_FILE_H

#include <stdbool.h>

#include <llvm-c/TargetMachine.h>

/* Compiles mod for tm and writes the object to path; false and *err on
 * failure (codegen_error.h). */
bool codegen_write_object(LLVMTargetMachineRef tm, LLVMModuleRef mod, const char *path, char **err);

#endif
