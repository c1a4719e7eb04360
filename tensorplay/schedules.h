// The schedules namespace: actions, schedule generators, the validator, the simulator and
// the memory model (pure logic).
// Include this from user code; library code includes the headers it needs.
#pragma once

#include "tensorplay/schedules/action.h"
#include "tensorplay/schedules/cost_model.h"
#include "tensorplay/schedules/csv.h"
#include "tensorplay/schedules/errors.h"
#include "tensorplay/schedules/format.h"
#include "tensorplay/schedules/generators.h"
#include "tensorplay/schedules/lowering.h"
#include "tensorplay/schedules/memory_costs.h"
#include "tensorplay/schedules/memory_model.h"
#include "tensorplay/schedules/policy.h"
#include "tensorplay/schedules/policy_factory.h"
#include "tensorplay/schedules/ready_set.h"
#include "tensorplay/schedules/schedule_kind.h"
#include "tensorplay/schedules/sharding_actions.h"
#include "tensorplay/schedules/simulation_result.h"
#include "tensorplay/schedules/simulator.h"
#include "tensorplay/schedules/timeline_export.h"
#include "tensorplay/schedules/validator.h"
