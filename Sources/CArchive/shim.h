#ifndef PACKAGER_CARCHIVE_SHIM_H
#define PACKAGER_CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>

// The AE_IF* file type macros carry casts that Swift does not import.
static const unsigned int carchive_type_regular = AE_IFREG;
static const unsigned int carchive_type_directory = AE_IFDIR;
static const unsigned int carchive_type_symlink = AE_IFLNK;
#endif
