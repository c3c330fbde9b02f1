import type { FastifyInstance } from 'fastify';
import { listInboxMessages, markInboxMessageRead } from '../../admin/inbox.js';
import type { Service } from '../../service.js';
import { principalOf } from '../auth.js';
import { emptyBody, notificationParams, notificationsQuery, parse } from '../schemas.js';

/** The caller's own inbox messages (src/admin/inbox.ts), for any role. */
export function notificationRoutes(app: FastifyInstance, svc: Service): void {
  app.get('/v1/notifications', { config: { roles: 'any' } }, async (req) =>
    listInboxMessages(svc.db.pool, principalOf(req).id, parse(notificationsQuery, req.query, 'query')),
  );

  app.post('/v1/notifications/:id/read', { config: { roles: 'any' } }, async (req) => {
    const { id } = parse(notificationParams, req.params, 'params');
    parse(emptyBody, req.body, 'body');
    return markInboxMessageRead(svc.db.pool, principalOf(req).id, id);
  });
}
