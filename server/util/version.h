/* SPDX-License-Identifier: MIT */
/*
 * The release every program and the control server report (--version, semvisor_build_info).
 * One place, so that a client and the server it talks to can tell they are the same build.
 */
#ifndef SV_UTIL_VERSION_H
#define SV_UTIL_VERSION_H

#ifndef SEMVISOR_VERSION
#define SEMVISOR_VERSION "0.1"
#endif

#endif
