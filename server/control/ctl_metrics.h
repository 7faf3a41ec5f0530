/* SPDX-License-Identifier: MIT */
/*
 * A Stats snapshot in the Prometheus text exposition format (0.0.4): what `semvisorctl metrics`
 * prints and what semvisord serves over HTTP (--metrics-listen), the same text from one place.
 */
#ifndef SV_CTL_METRICS_H
#define SV_CTL_METRICS_H

#include <stdio.h>

#include "semvisor.pb-c.h"

/* The Content-Type an HTTP server gives it. */
#define CTL_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

void ctl_metrics_print(FILE *f, const Semvisor__Stats *s);

#endif
