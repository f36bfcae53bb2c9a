" Vim filetype plugin
" Language: tlm

if exists('b:did_ftplugin')
  finish
endif
let b:did_ftplugin = 1

setlocal commentstring=//\ %s
setlocal comments=s1:/*,mb:*,ex:*/,://
" < and > are comparisons, never brackets.
setlocal matchpairs=(:),{:},[:]
setlocal formatoptions-=t formatoptions+=croql
setlocal suffixesadd=.tlm
let b:undo_ftplugin = 'setlocal commentstring< comments< matchpairs< formatoptions< suffixesadd<'

" The project's style: four spaces per bracket. Opt out with
" let g:tlm_recommended_style = 0
if get(g:, 'tlm_recommended_style', 1)
  setlocal expandtab shiftwidth=4 softtabstop=4 tabstop=8
  let b:undo_ftplugin .= ' | setlocal expandtab< shiftwidth< softtabstop< tabstop<'
endif
