/*
 * page.h - the page: the unit the device's size, its clusters, the page
 * table and the allocator's zspages are counted in. One definition for
 * the whole library; it matches the public UZRAM_PAGE_SIZE.
 */
#ifndef UZRAM_PAGE_H
#define UZRAM_PAGE_H

#include <stdint.h>

#include "uzram.h"

#define PAGE_SHIFT 12
#define PAGE UZRAM_PAGE_SIZE
#define PAGE_MASK ((uint64_t)PAGE - 1)

_Static_assert(PAGE == 1u << PAGE_SHIFT, "PAGE_SHIFT and UZRAM_PAGE_SIZE differ");

#endif
