// Package access holds docket's actors and grants.
//
// Every docket call names an [Actor]: a principal string "kind:name" such as
// svc:billing or user:ana. What an actor may do in a project comes from
// explicit grants of a [Capability] on that project, stored in
// docket.grants(principal, project, capability). There is no wildcard: a check
// is satisfied only by a grant naming exactly that principal, project and
// capability, and a grant on one project says nothing about another.
//
// Granting and revoking are operator acts, authorised by the database role
// that runs them (docket does not model administrators); each is recorded in
// docket.grant_events with the actor and instant given. The same functions
// are callable from SQL:
//
//	SELECT docket.grant_add('svc:billing', 'acme', 'job.create', 'user:ana', now());
//	SELECT docket.grant_check('svc:billing', 'acme', 'job.create');
//	SELECT docket.grant_revoke('svc:billing', 'acme', 'job.create', 'user:ana', now());
package access
