/*
 * rules_json.h - the rules set in force as JSON (rules_json.c).
 */
#ifndef SV_RULES_JSON_H
#define SV_RULES_JSON_H

#include <jansson.h>

#include "runtime/worker.h"

/* Every rule of w's rules set with its base and effective limit, where
 * the effective one came from ("rules", or an override's source) and
 * until when; any thread.  The caller owns the array. */
json_t *sv_rules_json(sv_worker *w);

#endif
