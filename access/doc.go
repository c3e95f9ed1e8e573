// Package access holds docket's actors, their bindings to database login
// roles, and grants.
//
// Every docket call names an [Actor]: a principal string "kind:name" such as
// svc:billing or user:ana. docket does not take it on the caller's word: a
// [Binding] records which login role may act as which principal, and every
// API function refuses ([db.ErrNotPermitted]) an actor the session's login
// role is not bound to. [Client.Bind] and [Client.Unbind] are an operator's
// acts; the schema owner needs no binding.
//
// What an actor may do in a project comes from explicit grants of a
// [Capability] on that project, stored in docket.grants(principal, project,
// capability). There is no wildcard: a check is satisfied only by a grant
// naming exactly that principal, project and capability, and a grant on one
// project says nothing about another.
//
// Grants are given and revoked by the owner, a docket_operator member, or a
// principal holding [GrantManage] on the project, never to itself; each is
// recorded in docket.grant_events with the actor, the login role and the
// instant given. The same functions are callable from SQL:
//
//	SELECT docket.grant_add('svc:billing', 'acme', 'job.create', 'user:ana', now());
//	SELECT docket.grant_check('svc:billing', 'acme', 'job.create');
//	SELECT docket.grant_revoke('svc:billing', 'acme', 'job.create', 'user:ana', now());
//
// docs/security.md describes the roles and the whole trust model.
package access
