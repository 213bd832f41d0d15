/* Minimal <stdlib.h> of the freestanding Hexagon test build: a bump allocator. */
#ifndef HTP_QEMU_STDLIB_H
#define HTP_QEMU_STDLIB_H
#include <stddef.h>
void * malloc(size_t n);
void * calloc(size_t n, size_t size);
void free(void * p);
void exit(int status) __attribute__((noreturn));
void abort(void) __attribute__((noreturn));
#endif
