"""A compiled model.so read as bytes, for the tests that damage it: the
ELF image, its sections and dynamic symbols (parsed here, so the tests find
the descriptor by its symbol rather than by searching for its magic), and
the integrity trailer tlmc appends (abi/model_so.h), recomputed with
hashlib, an implementation independent of abi/sha256.c."""
import hashlib
import struct

TRAILER_MAGIC = b'TLMSEAL1'
TRAILER_SIZE = 48


def trailer(image):
    """The trailer tlmc appends to an image of these bytes."""
    return TRAILER_MAGIC + struct.pack('<Q', len(image)) + hashlib.sha256(image).digest()


def split(data):
    """(image, trailer) of a sealed file; raises if the trailer is not the
    one trailer() computes for the image."""
    image, seal = data[:-TRAILER_SIZE], data[-TRAILER_SIZE:]
    if seal != trailer(image):
        raise ValueError('the file does not end in the integrity trailer of its image')
    return image, seal


def sections(image):
    """[(name, type, offset, size, addr)] of each section header but the
    null one."""
    shoff, = struct.unpack_from('<Q', image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', image, 0x3A)
    raw = [struct.unpack_from('<IIQQQQIIQQ', image, shoff + i * shentsize) for i in range(shnum)]
    names_off = raw[shstrndx][4]
    out = []
    for name, type_, _flags, addr, offset, size, *_ in raw[1:]:
        end = image.index(b'\0', names_off + name)
        out.append((image[names_off + name:end].decode(), type_, offset, size, addr))
    return out


def program_headers(image):
    """(offset, size) of the program header table."""
    phoff, = struct.unpack_from('<Q', image, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', image, 0x36)
    return phoff, phentsize * phnum


def section_headers(image):
    """(offset, size) of the section header table."""
    shoff, = struct.unpack_from('<Q', image, 0x28)
    shentsize, shnum = struct.unpack_from('<HH', image, 0x3A)
    return shoff, shentsize * shnum


def symbol(image, wanted):
    """(file offset, size) of a dynamic symbol's bytes."""
    secs = sections(image)
    dynsym = next(s for s in secs if s[0] == '.dynsym')
    dynstr = next(s for s in secs if s[0] == '.dynstr')
    for i in range(dynsym[3] // 24):
        name, _info, _other, shndx, value, size = struct.unpack_from('<IBBHQQ', image, dynsym[2] + 24 * i)
        end = image.index(b'\0', dynstr[2] + name)
        if image[dynstr[2] + name:end].decode() == wanted:
            _, _, off, _, addr = secs[shndx - 1]
            return value - addr + off, size
    raise KeyError(wanted)
