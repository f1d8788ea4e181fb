/* tenants.h: per-tenant quotas: jobs queued or running, and bytes stored (datasets and kept
 * results). Any thread; one mutex held only to find a tenant's counters and add to them. */
#ifndef GR_TENANTS_H
#define GR_TENANTS_H

#include "common/gr.h"

#include <stdint.h>

/* The limits (0: none); set once at start-up before any thread uses them. */
void gr_tenants_limits(int64_t max_jobs, int64_t max_bytes);

/* One more job for tenant: GR_OK, or GR_EFULL (429) when it holds max_jobs already. force:
 * counted even past the limit (jobs re-queued at start-up were accepted before). */
int gr_tenant_add_job(const char *tenant, int force, struct gr_err *e);
void gr_tenant_drop_job(const char *tenant);

/* n more bytes for tenant: GR_OK, or (refuse) the code given when that would pass max_bytes
 * (nothing added then). force: counted whatever the limit (start-up). */
int gr_tenant_add_bytes(const char *tenant, uint64_t n, int refuse, int force, struct gr_err *e);
void gr_tenant_drop_bytes(const char *tenant, uint64_t n);

/* Forget every tenant (shutdown, tests). */
void gr_tenants_reset(void);

#endif
