#include "object_file.h"

#include <errno.h>
#include <fcntl.h>
#include <llvm-c/Core.h>
#include <string.h>
#include <unistd.h>

#include "codegen_error.h"

static bool write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool codegen_write_object(LLVMTargetMachineRef tm, LLVMModuleRef mod, const char *path, char **err) {
    char *msg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg, &buf)) {
        bool r = codegen_fail(err, "cannot compile the object %s: %s", path, msg ? msg : "LLVM gave no reason");
        LLVMDisposeMessage(msg);
        return r;
    }
    const char *data = LLVMGetBufferStart(buf);
    size_t size = LLVMGetBufferSize(buf);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && write_all(fd, data, size);
    int saved = errno;
    if (fd >= 0 && close(fd) != 0 && ok) ok = false, saved = errno;
    LLVMDisposeMemoryBuffer(buf);
    if (!ok) return codegen_fail(err, "cannot write %s: %s", path, strerror(saved));
    return true;
}
