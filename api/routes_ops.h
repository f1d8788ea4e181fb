/* routes_ops.h: handlers of the operational routes (metrics, OpenAPI, dashboard), for the
 * routing table in routes.c. They run on the request's HTTP thread and answer at once. */
#ifndef GR_ROUTES_OPS_H
#define GR_ROUTES_OPS_H

#include "api/http.h"

void gr_get_metrics(struct gr_req *r);
void gr_get_openapi(struct gr_req *r);
void gr_get_dashboard(struct gr_req *r);
void gr_get_asset(struct gr_req *r); /* /assets/{id}: a file of the dashboard */

#endif
