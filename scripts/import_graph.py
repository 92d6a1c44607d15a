import ast, os, sys, collections
root='eagle3lab'
mods={}
for dp,dn,fn in os.walk(root):
    for f in fn:
        if f.endswith('.py'):
            p=os.path.join(dp,f); m=p[:-3].replace('/','.')
            if m.endswith('.__init__'): m=m[:-9]
            mods[m]=p
edges=collections.defaultdict(set)
for m,p in mods.items():
    t=ast.parse(open(p).read())
    pkg = m if p.endswith('__init__.py') else m.rsplit('.',1)[0]
    for n in ast.walk(t):
        tgts=[]
        if isinstance(n,ast.Import):
            tgts=[a.name for a in n.names]
        elif isinstance(n,ast.ImportFrom):
            base=n.module or ''
            if n.level:
                b=pkg.split('.')
                b=b[:len(b)-(n.level-1)]
                base='.'.join(b+([base] if base else []))
            tgts=[base]+[base+'.'+a.name for a in n.names]
        for t_ in tgts:
            if t_ in mods and t_!=m and not (m.startswith(t_+'.') ):
                edges[m].add(t_)
# cycles via SCC
idx={};low={};st=[];on=set();sccs=[];i=[0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v]=low[v]=i[0];i[0]+=1;st.append(v);on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        c=[]
        while True:
            w=st.pop();on.discard(w);c.append(w)
            if w==v:break
        if len(c)>1: sccs.append(c)
for v in mods:
    if v not in idx: sc(v)
print(len(mods),'modules',sum(len(e) for e in edges.values()),'edges')
for c in sccs: print('CYCLE',c)
if '-v' in sys.argv:
    for m in sorted(edges): print(m,'->',sorted(edges[m]))
