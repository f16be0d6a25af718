// Package jobslots owns the manager-wide bound on running Jobs (--max-active-jobs) and on the
// background ones among them (--max-background-jobs, drift checks: infrav1.Operation.Background).
//
// Invariants it keeps:
//   - It counts from the manager's cache only (no API request): the running managed Jobs it
//     lists, plus reservations of Jobs being created that the cache does not show yet.
//   - Reservations are judged under one lock against the list read under that lock, so a slot
//     is never handed out twice because lists were judged out of order.
//   - A create whose outcome is unknown keeps its reservation until the cache shows the Job or
//     the reservation's TTL passes; only a create known not to have happened releases it.
package jobslots
